"""Selectors: small paths that pick readings out of a frame, keeping each item's identity.

A selector is read against the frame's data as JSON (`frame_data`): every field of the
frame's ``readings`` at the top level (``host``, ``net``, ``temperatures``...), plus
``collectors`` (name -> status), ``node`` and ``taken_at``.

Grammar::

    selector := step ("." step)*
    step     := NAME filter* | "*" filter*
    filter   := "[*]" | "[" INTEGER "]" | "[" NAME "=" VALUE "]"

* ``host.cpu_pct``: a field of a single record.
* ``gpus[*].state``: every item of a list; the item's identity becomes the subject.
* ``net[name=eth0].speed_mbps``: items whose field ``name`` equals ``eth0`` (compared as text).
* ``temperatures[0].temp_c``: an item by position.
* ``collectors.*.state``: every value of a table; its key is the identity (label ``key``).

The identity of a list item is the first of `IDENTITY_FIELDS` it has whose value is unique
in the list (``gpus[index=0]``, ``net[name=eth0]``); without one it is its position
(``temperatures[#2]``). A path that leads nowhere (a field that does not exist, a ``null``,
an empty list) matches nothing: missing data is not an error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rigmon.schema import EventValue, Frame
from rigmon.typed import to_data

#: Fields that name a list item, in order of preference. ``index`` comes before ``name``
#: because a GPU's ``name`` is its product name, shared by every GPU of a node.
IDENTITY_FIELDS = ("index", "uuid", "name", "id", "sensor", "device", "path", "bus_id", "link")

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_STEP_RE = re.compile(rf"(?P<name>{_NAME}|\*)(?P<filters>(\[[^\[\]]*\])*)")
_FILTER_RE = re.compile(r"\[([^\[\]]*)\]")


#: Identity labels and path part of every item of a list, by ``id()`` of the list.
IdentityMemo = dict[int, list[tuple[dict[str, str], str]]]


class SelectorError(ValueError):
    """A selector's text does not follow the grammar; the message says where."""


@dataclass(frozen=True, slots=True)
class Filter:
    """One ``[...]`` of a step: every item, a position, or a field equal to a value."""

    kind: str
    """``all``, ``position`` or ``equals``."""
    field: str = ""
    value: str = ""
    position: int = 0


@dataclass(frozen=True, slots=True)
class Step:
    """One dotted part of a selector: a field name (or ``*``) and its filters."""

    name: str
    filters: tuple[Filter, ...] = ()


@dataclass(frozen=True, slots=True)
class Match:
    """One value a selector found.

    Attributes:
        path: canonical path of the value, every wildcard resolved
            (``gpus[index=0].state``, ``collectors.host.state``).
        subject: path of the record the value belongs to (``gpus[index=0]``); for a
            top-level scalar, the path itself.
        value: the scalar found (never ``None``: nulls match nothing).
        labels: the identity fields of every item on the way (``index``, ``uuid``,
            ``name``...), and ``key`` for a table entry.
    """

    path: str
    subject: str
    value: EventValue
    labels: dict[str, str]


@dataclass(frozen=True, slots=True)
class Selector:
    """A parsed selector; `select` applies it to frame data."""

    text: str
    steps: tuple[Step, ...]

    def select(self, data: Mapping[str, Any], memo: IdentityMemo | None = None) -> list[Match]:
        """Every scalar the selector reaches in ``data``, in document order.

        Args:
            data: frame data (`frame_data`).
            memo: identities of the lists already walked in this same ``data`` (the engine
                passes one per frame, so the rules over ``gpus[*]`` work out the GPUs'
                identities once); must not outlive ``data``: it is keyed by ``id()``.
        """
        out: list[Match] = []
        _walk(data, self.steps, 0, "", "", {}, out, {} if memo is None else memo)
        return out

    @property
    def field(self) -> str:
        """Name of the last step (the reading's field, ``state``, ``speed_mbps``)."""
        return self.steps[-1].name


def parse_selector(text: str) -> Selector:
    """Parse a selector.

    Raises:
        SelectorError: empty, a bad step or a bad filter, naming the offending part.
    """
    text = text.strip()
    if not text:
        raise SelectorError("empty selector")
    steps: list[Step] = []
    for part in _split_dots(text):
        m = _STEP_RE.fullmatch(part)
        if m is None:
            raise SelectorError(f"bad step {part!r} in selector {text!r}")
        filters = tuple(_parse_filter(f, text) for f in _FILTER_RE.findall(m.group("filters")))
        steps.append(Step(name=m.group("name"), filters=filters))
    return Selector(text=text, steps=tuple(steps))


def _split_dots(text: str) -> list[str]:
    """Split on dots outside brackets (a filter value may contain a dot: ``[name=enp1s0.10]``)."""
    parts: list[str] = []
    depth = 0
    current = ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "." and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return parts


def _parse_filter(inner: str, text: str) -> Filter:
    inner = inner.strip()
    if inner == "*":
        return Filter(kind="all")
    if re.fullmatch(r"-?\d+", inner):
        return Filter(kind="position", position=int(inner))
    key, sep, value = inner.partition("=")
    key = key.strip()
    if not sep or not re.fullmatch(_NAME, key) or not value.strip():
        raise SelectorError(f"bad filter [{inner}] in selector {text!r} (use [*], [N] or [field=value])")
    return Filter(kind="equals", field=key, value=value.strip().strip("\"'"))


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool))


def _walk(node: Any, steps: tuple[Step, ...], i: int, path: str, subject: str,
          labels: dict[str, str], out: list[Match], memo: IdentityMemo) -> None:
    if node is None:
        return
    if i == len(steps):
        if _scalar(node):
            out.append(Match(path=path, subject=subject or path, value=node, labels=labels))
        return
    step = steps[i]
    if not isinstance(node, Mapping):
        return
    children: list[tuple[Any, str, dict[str, str]]]
    if step.name == "*":
        children = [(v, _join(path, str(k)), {**labels, "key": str(k)}) for k, v in node.items()]
    elif step.name in node:
        children = [(node[step.name], _join(path, step.name), labels)]
    else:
        return
    last = i == len(steps) - 1
    for child, child_path, child_labels in children:
        for item, item_path, item_labels in _apply_filters(child, step.filters, child_path, child_labels, memo):
            # The subject is the record a leaf belongs to: the path before the last step.
            _walk(item, steps, i + 1, item_path, subject if last else item_path, item_labels, out, memo)


def _apply_filters(node: Any, filters: tuple[Filter, ...], path: str,
                   labels: dict[str, str], memo: IdentityMemo) -> list[tuple[Any, str, dict[str, str]]]:
    current = [(node, path, labels)]
    for flt in filters:
        nxt: list[tuple[Any, str, dict[str, str]]] = []
        for value, p, lab in current:
            if not isinstance(value, list):
                continue
            idents = memo.get(id(value))
            if idents is None:
                idents = memo[id(value)] = _identities(value)
            for pos, item in enumerate(value):
                if flt.kind == "position" and pos != (flt.position % len(value) if value else 0):
                    continue
                if flt.kind == "equals" and not (isinstance(item, Mapping) and _text(item.get(flt.field)) == flt.value):
                    continue
                ident_label, ident_path = idents[pos]
                nxt.append((item, f"{p}[{ident_path}]", {**lab, **ident_label}))
        current = nxt
    return current


def _identities(items: list[Any]) -> list[tuple[dict[str, str], str]]:
    """Identity labels and path part of every item of a list (the labels are shared: copy to change)."""
    per_item: list[dict[str, str]] = []
    for item in items:
        labels: dict[str, str] = {}
        if isinstance(item, Mapping):
            for key in IDENTITY_FIELDS:
                text = _text(item.get(key))
                if text is not None:
                    labels[key] = text
        per_item.append(labels)
    unique_key = None
    for key in IDENTITY_FIELDS:
        values = [labels.get(key) for labels in per_item]
        if all(v is not None for v in values) and len(set(values)) == len(values):
            unique_key = key
            break
    out: list[tuple[dict[str, str], str]] = []
    for pos, labels in enumerate(per_item):
        if unique_key is not None:
            out.append((labels, f"{unique_key}={labels[unique_key]}"))
        else:
            out.append(({**labels, "position": str(pos)}, f"#{pos}"))
    return out


def _text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def frame_data(frame: Frame) -> dict[str, Any]:
    """The data selectors read: the frame's readings, its collectors, node and time."""
    data: dict[str, Any] = to_data(frame.readings)
    data["collectors"] = to_data(frame.collectors)
    data["node"] = frame.node
    data["taken_at"] = frame.taken_at
    return data
