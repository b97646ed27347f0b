"""Whether a selector can ever match a frame: its path checked against the frame's record types.

A path that leads to absent hardware (no GPUs, a ``null``) matches nothing, and that is not an
error; a path that names no field of the frame's records (``psu_rial.volts``, ``gpus[*].powr_w``)
can never match anything, so a rule that reads it would never fire: the agent refuses it.
"""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin

from rigmon.alarms.selector import Filter, Selector, Step
from rigmon.alarms.selector_text import written_value
from rigmon.schema import CollectorStatus, Readings
from rigmon.typed import field_types, record_field_names


def _root() -> dict[str, Any]:
    """The types of what a selector starts from (`rigmon.alarms.walk.frame_view`)."""
    return {**field_types(Readings), "collectors": dict[str, CollectorStatus], "node": str, "taken_at": float}


def _strip_none(tp: Any) -> Any:
    """``X`` of ``X | None``; other types as they are (a union of several kinds stays a union)."""
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _fields(tp: Any) -> dict[str, Any] | None:
    """Field types of a record type (`None` for any other type)."""
    return field_types(tp) if record_field_names(tp) is not None else None


def path_problem(selector: Selector, numeric: bool = False) -> str | None:
    """Why ``selector`` can never match a frame of this schema, or ``None`` when it may.

    Only what the types tell is checked: a field a record does not have, a filter on something
    that is not a list, a step into a value that has no fields, a path ending at a record
    (rules compare values), and with ``numeric`` a path ending at text or true/false (a rule
    that compares numbers skips them). A type the check cannot follow (``Any``, a union of
    kinds) lets the rest of the path through.
    """
    problem, end = _walk(selector)
    if problem is None and numeric:
        words = _not_a_number(end)
        if words is not None:
            return f"{selector.text} is {words}, and this rule compares numbers"
    return problem


def _not_a_number(tp: Any) -> str | None:
    """What ``tp`` holds in words when it is never a number (text, true/false), else ``None``."""
    if get_origin(tp) is Literal:
        args = get_args(tp)
        if all(isinstance(a, str) for a in args):
            return f"one of {list(args)}"
        return None
    return {str: "text", bool: "true/false"}.get(tp)


def _walk(selector: Selector) -> tuple[str | None, Any]:
    """The problem of ``selector``'s path, or ``None`` and the type it ends at (``None`` when not followed)."""
    tp: Any = _root()
    where = ""
    for step in selector.steps:
        tp = _strip_none(tp)
        fields = tp if isinstance(tp, dict) else _fields(tp)
        if step.name == "*":
            if get_origin(tp) is dict:
                tp = get_args(tp)[1]
            elif fields is not None:
                return None, None  # every field of a record: of several types, not followed further
            elif _known(tp):
                return f"{where or 'the frame'} has no entries for '*'", None
            else:
                return None, None
        elif get_origin(tp) is dict:
            tp = get_args(tp)[1]
        elif fields is not None:
            if step.name not in fields:
                known = ", ".join(sorted(fields))
                return f"{where or 'the frame'} has no field {step.name!r} (it has: {known})", None
            tp = fields[step.name]
        elif _known(tp):
            return f"{where} is a single value, without a field {step.name!r}", None
        else:
            return None, None
        where = f"{where}.{step.name}" if where else step.name
        for n, flt in enumerate(step.filters):
            tp = _strip_none(tp)
            if get_origin(tp) is not tuple:
                if _known(tp):
                    return f"{where} is not a list: [{_filter_text(flt)}] cannot apply{_and_hint(step, n)}", None
                return None, None
            tp = get_args(tp)[0]
            item = _fields(_strip_none(tp))
            if flt.kind == "equals" and item is not None:
                for name in (flt.field, *(name for name, _ in flt.also)):
                    if name not in item:
                        known = ", ".join(sorted(item))
                        return f"items of {where} have no field {name!r} (they have: {known})", None
            where += f"[{_filter_text(flt)}]"
    end = _strip_none(tp)
    fields = _fields(end)
    if fields is not None or get_origin(end) is dict:
        # Rules compare values: a record or a table is never one.
        return f"{where} holds fields, not a value: name one of them", None
    return None, end


def _known(tp: Any) -> bool:
    """Whether the check knows what ``tp`` holds (a scalar, record, list or table), so it can refuse."""
    return tp in (str, int, float, bool) or get_origin(tp) in (dict, tuple) or _fields(tp) is not None


def _filter_text(flt: Filter) -> str:
    if flt.kind == "all":
        return "*"
    if flt.kind == "position":
        return str(flt.position)
    return ",".join(f"{name}={written_value(value)}" for name, value in ((flt.field, flt.value), *flt.also))


def _and_hint(step: Step, n: int) -> str:
    """How to say what ``[a=x][b=y]`` was likely meant for, when its second filter meets an item, not a list."""
    if n == 0 or step.filters[n].kind != "equals" or step.filters[n - 1].kind != "equals":
        return ""
    both = ",".join(_filter_text(f) for f in step.filters[n - 1:n + 1])
    return f" (to match the same items on both fields, write [{both}])"
