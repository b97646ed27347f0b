"""Walking selector steps: how one step reads a node (a field, a table's entries, filtered list
items with their identities), and the frame data selectors read (`frame_view`, `frame_data`).

The steps themselves and their order are `rigmon.alarms.selector.Selector`'s; these are the
reads it makes at each node, with getters resolved once per record type and item paths made
once per list shape.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rigmon.alarms.identities import (
    IDENTITY_CACHE_SIZE,
    RECORD_ORDER,
    IdentityMemo,
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

if TYPE_CHECKING:
    from rigmon.alarms.selector import Filter


def is_scalar(value: Any) -> bool:
    """Whether ``value`` is a scalar a selector matches (a ``str``, ``int``, ``float`` or ``bool``, or a subclass)."""
    return isinstance(value, (str, int, float, bool))


#: The scalar types themselves (a fast ``type(v) in SCALARS`` before `is_scalar`).
SCALARS = frozenset({str, int, float, bool})


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


def record_items(node: Any) -> list[tuple[str, Any]]:
    """Keys (as text) and values of a mapping or record; empty for any other node."""
    return _items(node) or []


#: The list types of frame data and records (a fast ``type(v) in LISTS`` before `is_list`).
LISTS = frozenset({list, tuple})


def is_list(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def step_children(node: Any, name: str, path: str,
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


def child_values(node: Any, name: str) -> list[Any]:
    if name == "*":
        items = _items(node)
        return [] if items is None else [v for _, v in items]
    child = field_value(node, name)
    return [] if child is None else [child]


def apply_filters(node: Any, filters: tuple[Filter, ...], path: str, labels: dict[str, str] | None,
                   memo: IdentityMemo) -> list[tuple[Any, str, dict[str, str] | None]]:
    current = [(node, path, labels)]
    for flt in filters:
        nxt: list[tuple[Any, str, dict[str, str] | None]] = []
        for value, p, lab in current:
            if not is_list(value):
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
                for name, text in flt.also:
                    positions = [pos for pos in positions if as_text(field_value(value[pos], name)) == text]
            for pos in positions:
                ident_label, ident_path = idents[pos]
                nxt.append((value[pos], f"{p}[{ident_path}]", None if lab is None else {**lab, **ident_label}))
        current = nxt
    return [c for c in current if c[0] is not None]


def filter_values(node: Any, filters: tuple[Filter, ...]) -> list[Any]:
    current = [node]
    for flt in filters:
        nxt: list[Any] = []
        for value in current:
            if not is_list(value):
                continue
            if flt.kind == "all":
                nxt.extend(value)
            elif flt.kind == "position":
                if value:
                    nxt.append(value[flt.position % len(value)])
            else:
                kept = [item for item in value if as_text(field_value(item, flt.field)) == flt.value]
                for name, text in flt.also:
                    kept = [item for item in kept if as_text(field_value(item, name)) == text]
                nxt.extend(kept)
        current = nxt
    return current


#: Field getters by field name, then by the type of the node read (see `make_getter`).
_GETTERS: dict[str, dict[type, Callable[[Any], Any]]] = {}


def field_getters(name: str) -> dict[type, Callable[[Any], Any]]:
    found = _GETTERS.get(name)
    if found is None:
        found = _GETTERS[name] = {}
    return found


def make_getter(tp: type, name: str, getters: dict[type, Callable[[Any], Any]]) -> Callable[[Any], Any]:
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


def key_paths(path: str, table: dict[Any, Any]) -> list[str]:
    keys = tuple(table)
    key = (path, keys, tuple(map(type, keys)))  # ``1``, ``1.0`` and ``True`` are equal keys but other text
    found = _KEY_PATHS.get(key)
    if found is None:
        if len(_KEY_PATHS) >= IDENTITY_CACHE_SIZE:
            _KEY_PATHS.clear()
        found = _KEY_PATHS[key] = [f"{path}.{k!s}" if path else str(k) for k in keys]
    return found


def leaf_pairs(current: list[tuple[Any, str, str]], name: str) -> list[tuple[str, EventValue]]:
    """``(subject, value)`` of the scalar field ``name`` of every node of ``current``: the last step
    of `Selector.subject_values` when it is a plain field (a leaf's path is made only when it has
    no subject)."""
    getters = field_getters(name)
    out: list[tuple[str, EventValue]] = []
    append = out.append
    last_tp: type | None = None
    get: Callable[[Any], Any] = none_getter
    for node, path, subject in current:
        tp = type(node)
        if tp is not last_tp:
            found = getters.get(tp)
            get = found if found is not None else make_getter(tp, name, getters)
            last_tp = tp
        value = get(node)
        if type(value) in SCALARS or (value is not None and is_scalar(value)):
            append((subject or (f"{path}.{name}" if path else name), value))
    return out


def plain_filters(node: Any, filters: tuple[Filter, ...], path: str,
                   memo: IdentityMemo) -> Sequence[tuple[Any, str]]:
    """`apply_filters` without labels: ``(item, path)`` of the items the filters keep."""
    if len(filters) == 1 and filters[0].kind == "all" and type(node) in LISTS:
        if not node:
            return ()
        return [(item, p) for item, p in zip(node, item_paths(path, list_identities(node, memo)))
                if item is not None]
    return [(item, p) for item, p, _ in apply_filters(node, filters, path, None, memo)]


def item_triples(node: Any, filters: tuple[Filter, ...], path: str,
                  memo: IdentityMemo) -> Iterable[tuple[Any, str, str]]:
    """``(item, path, path)`` of the items the filters keep: the nodes of a step before the last,
    each its own subject."""
    if len(filters) == 1 and filters[0].kind == "all" and type(node) in LISTS:
        if not node:
            return ()
        idents = list_identities(node, memo)
        paths = item_paths(path, idents)
        if cached_identities(idents):
            # Only lists of records of one type have their identities cached: no item is None.
            return zip(node, paths, paths)
        return [(item, p, p) for item, p in zip(node, paths) if item is not None]
    return [(item, p, p) for item, p, _ in apply_filters(node, filters, path, None, memo)]


#: Whether a type's instances are frozen records (fields never rebound), by type.
_FROZEN: dict[type, bool] = {}


def frozen_record(tp: type) -> bool:
    """Whether ``tp`` is a frozen record type: a frozen `msgspec.Struct` or a frozen dataclass."""
    found = _FROZEN.get(tp)
    if found is None:
        config = getattr(tp, "__struct_config__", None)
        if config is not None:
            found = bool(config.frozen)
        else:
            params = getattr(tp, "__dataclass_params__", None)
            found = params is not None and bool(params.frozen)
        _FROZEN[tp] = found
    return found


def unchanging(children: list[tuple[Any, str]]) -> bool:
    """Whether every child is a tuple of frozen records: what is read below it cannot change while
    the tuple is the same object."""
    for child, _ in children:
        if type(child) is not tuple:
            return False
        for item in child:
            if not frozen_record(type(item)):
                return False
    return True


class WalkCarry:
    """What a selector's walk found in the previous frame, kept for the next (one per engine).

    Collectors give records whose values did not change again, the same objects (a GPU's NVLink
    records: `rigmon.collectors.gpu`), while the records above them are new each frame. When the
    last list step before a selector's leaf reaches the very same tuples of frozen records, under
    the same paths, as in the previous frame, the nodes it leads to and the leaf's
    ``(subject, value)`` pairs are those of the previous frame: they are given again, the same
    list objects, so a counter rule can see that nothing it reads changed
    (`rigmon.alarms.quiet.counter_update`). Only tuples of frozen records are carried: nothing
    below them can change while they are the same objects (the carry keeps them alive, so an
    ``id()`` cannot be another's). Plain data (`frame_data`: lists and dicts) is never carried.

    Attributes:
        levels: by a selector's leading steps, the children that their last step read (the
            tuples, with their paths) and the nodes they led to.
        pairs: by selector text, the nodes of its leading steps and the leaf's pairs read from them.
    """

    __slots__ = ("levels", "pairs")

    def __init__(self) -> None:
        self.levels: dict[tuple[Any, ...], tuple[list[tuple[Any, str]], list[tuple[Any, str, str]]]] = {}
        self.pairs: dict[str, tuple[list[tuple[Any, str, str]], list[tuple[str, EventValue]]]] = {}


def same_children(a: list[tuple[Any, str]], b: list[tuple[Any, str]]) -> bool:
    """Whether two lists of ``(child, path)`` hold the same objects under equal paths."""
    if len(a) != len(b):
        return False
    for (x, p), (y, q) in zip(a, b):
        if x is not y or p != q:
            return False
    return True


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
