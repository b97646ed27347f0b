"""Readings from a newer agent: an enum-like text value this version does not know, kept as text.

Within a schema version the wire grows by additions, and that includes new values of the closed
sets of readings (`RaidHealth` gained ``unknown``, a link state may gain a word). The compiled
decoder checks every ``Literal`` field, so a dashboard older than such a value refused the whole
frame and showed the node out of touch. `decode_tolerating_readings` is the dashboard's second try
after that refusal: every ``Literal`` text field inside `Readings` whose value is not one this version
knows is decoded with a stand-in, then given its own text back. The record then holds text outside
its annotation; its readers take any value they do not know as not known now (no colour, not
counted healthy or failed: `rigmon.schema.storage.raid_unknown`, `rigmon.summary.link_figures`). Only
readings: the frame's own states (collectors, events, alarms) drive the dashboard's logic and stay
strict, as does the agent's own decoding (`rigmon.schema.decode`).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin

import msgspec

from rigmon.schema.frame import Readings, T, decode_data
from rigmon.typed import record_fields

#: Where a value sits in decoded data: field names, list positions, dict keys.
Path = tuple[str | int, ...]


def decode_tolerating_readings(cls: type[T], data: Any) -> T | None:
    """``cls`` from parsed (and cleaned) JSON ``data`` whose readings may hold enum-like values this
    version does not know; ``None`` when ``data`` has no such value (its refusal stands as it was).

    ``data`` is changed in place (it is the caller's own parse). Each unknown value is decoded as a
    stand-in (``unknown`` where the set has it) and put back as its own text afterwards.

    Raises:
        SchemaError: ``data`` does not fit ``cls`` for another reason too.
    """
    found: list[tuple[Path, str]] = []
    _walk(typing.cast(Any, cls))(data, (), False, found)
    if not found:
        return None
    record = decode_data(cls, data)
    for path, text in found:
        record = _put(record, path, text)
    return record


Walker = Callable[[Any, Path, bool, list[tuple[Path, str]]], Any]


def _nothing(value: Any, path: Path, inside: bool, found: list[tuple[Path, str]]) -> Any:
    return value


@cache
def _walk(tp: Any) -> Walker:
    """The function that finds (and stands in for) unknown ``Literal`` texts in data of type ``tp``,
    inside `Readings` only (``inside``); cached per type."""
    origin = get_origin(tp)
    if origin is Literal:
        allowed = get_args(tp)
        if not all(isinstance(a, str) for a in allowed):
            return _nothing
        stand_in = "unknown" if "unknown" in allowed else allowed[0]

        def literal(value: Any, path: Path, inside: bool, found: list[tuple[Path, str]]) -> Any:
            if inside and isinstance(value, str) and value not in allowed:
                found.append((path, value))
                return stand_in
            return value

        return literal
    if origin is Union or origin is types.UnionType:
        members = [a for a in get_args(tp) if a is not type(None)]
        # Only ``X | None``: which member a value of a wider union was meant for is not told by its shape.
        return _walk(members[0]) if len(members) == 1 else _nothing
    if origin is tuple or origin is list:
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis or origin is list:
            item = _walk(args[0])

            def items(value: Any, path: Path, inside: bool, found: list[tuple[Path, str]]) -> Any:
                if isinstance(value, list):
                    for i, v in enumerate(value):
                        value[i] = item(v, (*path, i), inside, found)
                return value

            return items
        return _nothing
    if origin is dict:
        entry = _walk(get_args(tp)[1])

        def entries(value: Any, path: Path, inside: bool, found: list[tuple[Path, str]]) -> Any:
            if isinstance(value, dict):
                for k, v in value.items():
                    value[k] = entry(v, (*path, k), inside, found)
            return value

        return entries
    fields = record_fields(tp)
    if fields is None:
        return _nothing
    readings = tp is Readings
    # Resolved lazily: a record type may hold itself.
    walkers: dict[str, Walker] = {}

    def record(value: Any, path: Path, inside: bool, found: list[tuple[Path, str]]) -> Any:
        if not isinstance(value, dict):
            return value
        within = inside or readings
        for f in typing.cast(tuple[Any, ...], fields):
            if f.name in value:
                walker = walkers.get(f.name)
                if walker is None:
                    walker = walkers[f.name] = _walk(f.type)
                value[f.name] = walker(value[f.name], (*path, f.name), within, found)
        return value

    return record


def _put(obj: Any, path: Path, value: str) -> Any:
    """``obj`` with ``value`` at ``path``, its records rebuilt up the way (unchecked: `msgspec.structs.replace`)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(obj, msgspec.Struct):
        assert isinstance(head, str)
        return msgspec.structs.replace(obj, **{head: _put(getattr(obj, head), rest, value)})
    if isinstance(obj, (tuple, list)):
        assert isinstance(head, int)
        items = list(obj)
        items[head] = _put(items[head], rest, value)
        return type(obj)(items)
    if isinstance(obj, dict):
        return {**obj, head: _put(obj[head], rest, value)}
    return obj
