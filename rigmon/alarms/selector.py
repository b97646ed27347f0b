"""Selectors: small paths that pick readings out of a frame, keeping each item's identity.

A selector is read against the frame's data as JSON (`frame_data`): every field of the
frame's ``readings`` at the top level (``host``, ``net``, ``temperatures``...), plus
``collectors`` (name -> status), ``node`` and ``taken_at``. The engine reads the same from the
frame's records as they are (`frame_view`): a record reads as the dict of its fields and a
tuple as a list, so nothing is converted and the matches are the same.

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

import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rigmon.alarms.identities import (
    IDENTITY_CACHE_SIZE,
    IDENTITY_FIELDS as IDENTITY_FIELDS,
    RECORD_ORDER,
    IdentityMemo as IdentityMemo,
    as_text,
    cached_identities,
    identities,
    item_paths,
    list_identities,
    none_getter,
    record_fields,
)
from rigmon.schema import EventValue, Frame, Readings
from rigmon.typed import to_data

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_STEP_RE = re.compile(rf"(?P<name>{_NAME}|\*)(?P<filters>(\[[^\[\]]*\])*)")
_FILTER_RE = re.compile(r"\[([^\[\]]*)\]")


#: Nodes reached (with path and subject) by leading steps of selectors, by those steps.
LevelMemo = dict[tuple["Step", ...], list[tuple[Any, str, str]]]


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
    """A parsed selector; `select` applies it to frame data or a frame's view."""

    text: str
    steps: tuple[Step, ...]

    def select(self, data: Mapping[str, Any], memo: IdentityMemo | None = None) -> list[Match]:
        """Every scalar the selector reaches in ``data``, in document order.

        Args:
            data: frame data (`frame_data`) or a frame's view (`frame_view`): a record
                reads as the dict of its fields and a tuple as a list,
                as `rigmon.typed.to_data` would convert them, so both give the same matches.
            memo: identities of the lists already walked in this same ``data`` (the engine
                passes one per frame, so the rules over ``gpus[*]`` work out the GPUs'
                identities once); must not outlive ``data``: it is keyed by ``id()``.
        """
        current = self._reach(data, {} if memo is None else memo, True)
        return [Match(path=path, subject=subject or path, value=node, labels=labels)  # type: ignore[arg-type]
                for node, path, subject, labels in current if type(node) in _SCALARS or _scalar(node)]

    def subject_values(self, data: Mapping[str, Any], memo: IdentityMemo | None = None,
                       levels: LevelMemo | None = None) -> list[tuple[str, EventValue]]:
        """``(subject, value)`` of every match `select` would give, in the same order, without
        building the matches and their labels (what a rule that keeps memory per subject needs
        on a quiet frame).

        Args:
            data: as for `select`.
            memo: as for `select`.
            levels: the records reached by the steps before the last, by those steps, for the
                selectors of this same ``data`` (the engine passes one per frame: its two NVLink
                rules walk ``gpus[*].nvlinks[*]`` once).
        """
        if memo is None:
            memo = {}
        current: list[tuple[Any, str, str]] = [(data, "", "")]
        last = len(self.steps) - 1
        first = 0
        if levels is not None and last > 0:
            prefix = self.steps[:last]
            shared = levels.get(prefix)
            if shared is None:
                shared = levels[prefix] = self._walk_plain(current, 0, last, memo)
            current, first = shared, last
        elif last > 0:
            current, first = self._walk_plain(current, 0, last, memo), last
        leaf = self.steps[last]
        if leaf.name != "*" and not leaf.filters and first == last:
            return _leaf_pairs(current, leaf.name)
        current = self._walk_plain(current, first, last + 1, memo)
        return [(subject or path, node) for node, path, subject in current
                if type(node) in _SCALARS or _scalar(node)]

    def _reach(self, data: Mapping[str, Any], memo: IdentityMemo,
               labelled: bool) -> list[tuple[Any, str, str, dict[str, str] | None]]:
        """Every node the steps lead to, with its path, subject and (when ``labelled``) identity labels."""
        # Level by level: all leaves are at the same depth, so this is document order.
        current: list[tuple[Any, str, str, dict[str, str] | None]] = [(data, "", "", {} if labelled else None)]
        return self._walk_steps(current, 0, len(self.steps), memo)

    def _walk_plain(self, current: list[tuple[Any, str, str]], begin: int, end: int,
                    memo: IdentityMemo) -> list[tuple[Any, str, str]]:
        """As `_walk_steps` without labels: ``(node, path, subject)`` of the nodes ``steps[begin:end]``
        lead to. Fields are read by getters resolved once per record type (`_getters`), and the
        paths of a list's items are made once per list shape (`item_paths`)."""
        last = len(self.steps) - 1
        for i in range(begin, end):
            step = self.steps[i]
            name = step.name
            filters = step.filters
            leaf = i == last
            nxt: list[tuple[Any, str, str]] = []
            append = nxt.append
            if name == "*":
                for node, path, subject in current:
                    if type(node) is dict and not filters and not leaf:
                        # A table's entries (``collectors.*``), each its own subject.
                        nxt.extend([(child, p, p) for p, child in zip(_key_paths(path, node), node.values())
                                    if child is not None])
                        continue
                    for child, child_path, _ in _children(node, name, path, None):
                        if filters:
                            for item, item_path in _plain_filters(child, filters, child_path, memo):
                                append((item, item_path, subject if leaf else item_path))
                        elif child is not None:
                            append((child, child_path, subject if leaf else child_path))
            else:
                getters = _getters(name)
                for node, path, subject in current:
                    tp = type(node)
                    get = getters.get(tp)
                    if get is None:
                        get = _make_getter(tp, name, getters)
                    child = get(node)
                    if child is None:
                        continue
                    child_path = f"{path}.{name}" if path else name
                    if filters:
                        if leaf:
                            for item, item_path in _plain_filters(child, filters, child_path, memo):
                                append((item, item_path, subject))
                        else:
                            nxt.extend(_item_triples(child, filters, child_path, memo))
                    else:
                        append((child, child_path, subject if leaf else child_path))
            if not nxt:
                return []
            current = nxt
        return current

    def _walk_steps(self, current: list[tuple[Any, str, str, dict[str, str] | None]], begin: int, end: int,
                    memo: IdentityMemo) -> list[tuple[Any, str, str, dict[str, str] | None]]:
        """The nodes ``steps[begin:end]`` lead to from ``current``."""
        last = len(self.steps) - 1
        for i in range(begin, end):
            step = self.steps[i]
            nxt: list[tuple[Any, str, str, dict[str, str] | None]] = []
            for node, path, subject, labels in current:
                for child, child_path, child_labels in _children(node, step.name, path, labels):
                    if step.filters:
                        for item, item_path, item_labels in _apply_filters(child, step.filters, child_path,
                                                                           child_labels, memo):
                            # The subject is the record a leaf belongs to: the path before the last step.
                            nxt.append((item, item_path, subject if i == last else item_path, item_labels))
                    elif child is not None:
                        nxt.append((child, child_path, subject if i == last else child_path, child_labels))
            if not nxt:
                return []
            current = nxt
        return current

    def values(self, data: Mapping[str, Any]) -> list[EventValue]:
        """The values `select` would match, in the same order, without their paths and labels
        (cheap: no identities are worked out)."""
        current: list[Any] = [data]
        for step in self.steps:
            nxt: list[Any] = []
            name, filters = step.name, step.filters
            if name == "*":
                children: list[Any] = [child for node in current
                                       for child in (node.values() if type(node) is dict else _child_values(node, name))
                                       if child is not None]
            else:
                getters = _getters(name)
                children = []
                for node in current:
                    tp = type(node)
                    get = getters.get(tp)
                    if get is None:
                        get = _make_getter(tp, name, getters)
                    child = get(node)
                    if child is not None:
                        children.append(child)
            if not filters:
                nxt = children
            elif len(filters) == 1 and filters[0].kind == "all":
                for child in children:
                    if type(child) in _LISTS:
                        nxt.extend(child)
                    elif _is_list(child):
                        nxt.extend(_filter_values(child, filters))
            else:
                for child in children:
                    nxt.extend(_filter_values(child, filters))
            if not nxt:
                return []
            current = nxt
        return [v for v in current if type(v) in _SCALARS or _scalar(v)]

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


_SCALARS = frozenset({str, int, float, bool})

def field_value(node: Any, name: str) -> Any:
    """Field ``name`` of a mapping or record; ``None`` when it has none or is neither."""
    if type(node) is dict:
        return node.get(name)
    fields = record_fields(type(node))
    if fields is not None:
        return getattr(node, name) if name in fields else None
    if isinstance(node, Mapping):
        return node.get(name)
    return None


def _items(node: Any) -> list[tuple[str, Any]] | None:
    """Keys (as text) and values of a mapping or record; ``None`` when it is neither."""
    if type(node) is not dict and record_fields(type(node)) is not None:
        return [(name, getattr(node, name)) for name in RECORD_ORDER[type(node)]]
    if isinstance(node, Mapping):
        return [(str(k), v) for k, v in node.items()]
    return None


def _is_list(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def _children(node: Any, name: str, path: str,
              labels: dict[str, str] | None) -> list[tuple[Any, str, dict[str, str] | None]]:
    """The nodes one step (``name`` or ``*``) leads to from ``node``, with their paths and labels
    (``None`` for none wanted)."""
    if name == "*":
        items = _items(node)
        if items is None:
            return []
        if labels is None:
            return [(v, f"{path}.{k}" if path else k, None) for k, v in items]
        return [(v, f"{path}.{k}" if path else k, {**labels, "key": k}) for k, v in items]
    child = field_value(node, name)
    if child is None:
        return []
    return [(child, f"{path}.{name}" if path else name, labels)]


def _child_values(node: Any, name: str) -> list[Any]:
    if name == "*":
        items = _items(node)
        return [] if items is None else [v for _, v in items]
    child = field_value(node, name)
    return [] if child is None else [child]


def _apply_filters(node: Any, filters: tuple[Filter, ...], path: str, labels: dict[str, str] | None,
                   memo: IdentityMemo) -> list[tuple[Any, str, dict[str, str] | None]]:
    current = [(node, path, labels)]
    for flt in filters:
        nxt: list[tuple[Any, str, dict[str, str] | None]] = []
        for value, p, lab in current:
            if not _is_list(value):
                continue
            idents = memo.get(id(value))
            if idents is None:
                idents = memo[id(value)] = identities(value)
            if flt.kind == "all":
                positions: range | list[int] = range(len(value))
            elif flt.kind == "position":
                positions = [flt.position % len(value)] if value else []
            else:
                positions = [pos for pos, item in enumerate(value) if as_text(field_value(item, flt.field)) == flt.value]
            for pos in positions:
                ident_label, ident_path = idents[pos]
                nxt.append((value[pos], f"{p}[{ident_path}]", None if lab is None else {**lab, **ident_label}))
        current = nxt
    return [c for c in current if c[0] is not None]


def _filter_values(node: Any, filters: tuple[Filter, ...]) -> list[Any]:
    current = [node]
    for flt in filters:
        nxt: list[Any] = []
        for value in current:
            if not _is_list(value):
                continue
            if flt.kind == "all":
                nxt.extend(value)
            elif flt.kind == "position":
                if value:
                    nxt.append(value[flt.position % len(value)])
            else:
                nxt.extend(item for item in value if as_text(field_value(item, flt.field)) == flt.value)
        current = nxt
    return current


#: Field getters by field name, then by the type of the node read (see `_make_getter`).
_GETTERS: dict[str, dict[type, Callable[[Any], Any]]] = {}


def _getters(name: str) -> dict[type, Callable[[Any], Any]]:
    found = _GETTERS.get(name)
    if found is None:
        found = _GETTERS[name] = {}
    return found


def _make_getter(tp: type, name: str, getters: dict[type, Callable[[Any], Any]]) -> Callable[[Any], Any]:
    """What `field_value` does for a node of type ``tp``, resolved once for the type."""
    if tp is dict:
        get: Callable[[Any], Any] = operator.methodcaller("get", name)
    else:
        fields = record_fields(tp)
        if fields is not None:
            get = operator.attrgetter(name) if name in fields else none_getter
        elif issubclass(tp, Mapping):
            get = operator.methodcaller("get", name)
        else:
            get = none_getter
    getters[tp] = get
    return get


#: Paths of a table's entries (``collectors.gpu``...) by the table's path and its keys.
_KEY_PATHS: dict[tuple[str, tuple[Any, ...], tuple[type, ...]], list[str]] = {}


def _key_paths(path: str, table: dict[Any, Any]) -> list[str]:
    keys = tuple(table)
    key = (path, keys, tuple(map(type, keys)))  # ``1``, ``1.0`` and ``True`` are equal keys but other text
    found = _KEY_PATHS.get(key)
    if found is None:
        if len(_KEY_PATHS) >= IDENTITY_CACHE_SIZE:
            _KEY_PATHS.clear()
        found = _KEY_PATHS[key] = [f"{path}.{k!s}" if path else str(k) for k in keys]
    return found


def _leaf_pairs(current: list[tuple[Any, str, str]], name: str) -> list[tuple[str, EventValue]]:
    """``(subject, value)`` of the scalar field ``name`` of every node of ``current``: the last step
    of `Selector.subject_values` when it is a plain field (a leaf's path is made only when it has
    no subject)."""
    getters = _getters(name)
    out: list[tuple[str, EventValue]] = []
    append = out.append
    last_tp: type | None = None
    get: Callable[[Any], Any] = none_getter
    for node, path, subject in current:
        tp = type(node)
        if tp is not last_tp:
            found = getters.get(tp)
            get = found if found is not None else _make_getter(tp, name, getters)
            last_tp = tp
        value = get(node)
        if type(value) in _SCALARS or (value is not None and _scalar(value)):
            append((subject or (f"{path}.{name}" if path else name), value))
    return out


def _plain_filters(node: Any, filters: tuple[Filter, ...], path: str,
                   memo: IdentityMemo) -> Sequence[tuple[Any, str]]:
    """`_apply_filters` without labels: ``(item, path)`` of the items the filters keep."""
    if len(filters) == 1 and filters[0].kind == "all" and type(node) in _LISTS:
        if not node:
            return ()
        return [(item, p) for item, p in zip(node, item_paths(path, list_identities(node, memo)))
                if item is not None]
    return [(item, p) for item, p, _ in _apply_filters(node, filters, path, None, memo)]


def _item_triples(node: Any, filters: tuple[Filter, ...], path: str,
                  memo: IdentityMemo) -> Iterable[tuple[Any, str, str]]:
    """``(item, path, path)`` of the items the filters keep: the nodes of a step before the last,
    each its own subject."""
    if len(filters) == 1 and filters[0].kind == "all" and type(node) in _LISTS:
        if not node:
            return ()
        idents = list_identities(node, memo)
        paths = item_paths(path, idents)
        if cached_identities(idents):
            # Only lists of records of one type have their identities cached: no item is None.
            return zip(node, paths, paths)
        return [(item, p, p) for item, p in zip(node, paths) if item is not None]
    return [(item, p, p) for item, p, _ in _apply_filters(node, filters, path, None, memo)]


_LISTS = frozenset({list, tuple})
def frame_view(frame: Frame) -> dict[str, Any]:
    """What selectors read, without converting the frame: the frame's readings (records, as
    they are), its collectors, node and time. Selectors find in it what they find in
    `frame_data`, at a fraction of the cost (nothing is copied)."""
    readings = frame.readings
    data: dict[str, Any] = {name: getattr(readings, name) for name in _readings_fields()}
    data["collectors"] = frame.collectors
    data["node"] = frame.node
    data["taken_at"] = frame.taken_at
    return data


def _readings_fields() -> tuple[str, ...]:
    record_fields(Readings)
    return RECORD_ORDER[Readings]


def frame_data(frame: Frame) -> dict[str, Any]:
    """The data selectors read, as plain data: the frame's readings, its collectors, node and time."""
    data: dict[str, Any] = to_data(frame.readings)
    data["collectors"] = to_data(frame.collectors)
    data["node"] = frame.node
    data["taken_at"] = frame.taken_at
    return data
