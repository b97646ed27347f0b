"""Identities of list items as selectors name them (``gpus[index=0]``, ``temperatures[#2]``), and what
they need to know about record types; worked out once per list shape and kept (see `identities`)."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rigmon.typed import record_field_names

#: Fields that name a list item, in order of preference. ``index`` comes before ``name``
#: because a GPU's ``name`` is its product name, shared by every GPU of a node. ``pci_bus_id``
#: names an AMD GPU (``amd_gpus[pci_bus_id=0000:c3:00.0]``): its DRM card number follows the
#: drivers' probe order, and its place in the list moves when a GPU before it is gone.
IDENTITY_FIELDS = ("index", "uuid", "name", "id", "sensor", "device", "path", "bus_id", "link", "pci_bus_id")

#: Identity labels and path part of every item of a list, by ``id()`` of the list.
IdentityMemo = dict[int, list[tuple[dict[str, str], str]]]

#: Field names of record types (wire records, dataclasses), and ``None`` for types that are no record, by type.
_RECORD_FIELDS: dict[type, frozenset[str] | None] = {}
RECORD_ORDER: dict[type, tuple[str, ...]] = {}
#: `IDENTITY_FIELDS` that a record type has, in order of preference, by type.
RECORD_IDENTITY: dict[type, tuple[str, ...]] = {}


def record_fields(tp: type) -> frozenset[str] | None:
    """The field names of a record type (`rigmon.typed.record_field_names`), ``None`` for any other type."""
    try:
        return _RECORD_FIELDS[tp]
    except KeyError:
        pass
    order = record_field_names(tp)
    if order is not None:
        RECORD_ORDER[tp] = order
        RECORD_IDENTITY[tp] = tuple(key for key in IDENTITY_FIELDS if key in order)
        _RECORD_FIELDS[tp] = frozenset(order)
    else:
        _RECORD_FIELDS[tp] = None
    return _RECORD_FIELDS[tp]

def none_getter(node: Any) -> None:
    return None

#: Paths of a list's items (``gpus[index=0]``...) by the list's path and its identities (which
#: the entry keeps alive, so the ``id()`` cannot be another's). Cleared with `_IDENTITY_CACHE`.
_ITEM_PATHS: dict[tuple[str, int], tuple[list[tuple[dict[str, str], str]], list[str]]] = {}


def item_paths(path: str, idents: list[tuple[dict[str, str], str]]) -> list[str]:
    key = (path, id(idents))
    found = _ITEM_PATHS.get(key)
    if found is not None and found[0] is idents:
        return found[1]
    paths = [f"{path}[{ident_path}]" for _, ident_path in idents]
    if cached_identities(idents):
        if len(_ITEM_PATHS) >= 4 * IDENTITY_CACHE_SIZE:
            _ITEM_PATHS.clear()
        _ITEM_PATHS[key] = (idents, paths)
    return paths


#: Identities of lists of records already worked out, by the records' type and the raw values
#: of their identity fields (with the values' types: ``1``, ``1.0`` and ``True`` are equal keys
#: but different text). A node's GPUs, links and arrays keep their identities from frame to
#: frame, so a frame's lists are mostly found here. Entries are shared: never change them.
_IDENTITY_CACHE: dict[tuple[Any, ...], list[tuple[dict[str, str], str]]] = {}
#: Entries kept before the cache starts afresh (a node has a few dozen lists).
IDENTITY_CACHE_SIZE = 512
#: How to read the identity fields of a record type: a getter and whether it reads several
#: fields (a tuple each); ``None`` for a type that is no record.
_IDENTITY_GETTERS: dict[type, tuple[Callable[[Any], Any], bool] | None] = {}
_NO_PLAN: Any = object()


def _identity_plan(tp: type) -> tuple[Callable[[Any], Any], bool] | None:
    plan: tuple[Callable[[Any], Any], bool] | None = None
    if record_fields(tp) is not None:
        keys = RECORD_IDENTITY[tp]
        plan = (operator.attrgetter(*keys) if keys else none_getter, len(keys) > 1)
    _IDENTITY_GETTERS[tp] = plan
    return plan


#: ``id()`` of the lists held in `_IDENTITY_CACHE` (only their items' paths are kept).
_CACHED_IDENTITIES: set[int] = set()



def cached_identities(idents: list[tuple[dict[str, str], str]]) -> bool:
    return id(idents) in _CACHED_IDENTITIES


def identities(items: Sequence[Any]) -> list[tuple[dict[str, str], str]]:
    """Identity labels and path part of every item of a list (the labels are shared: copy to change)."""
    if not items:
        return []
    tp = type(items[0])
    plan = _IDENTITY_GETTERS.get(tp, _NO_PLAN)
    if plan is _NO_PLAN:
        plan = _identity_plan(tp)
    if plan is not None and len(set(map(type, items))) == 1:
        getter, several = plan
        raw = tuple(map(getter, items))
        key = (tp, raw, tuple(map(type, itertools.chain.from_iterable(raw) if several else raw)))
        found = _IDENTITY_CACHE.get(key)
        if found is None:
            if len(_IDENTITY_CACHE) >= IDENTITY_CACHE_SIZE:
                _IDENTITY_CACHE.clear()
                _CACHED_IDENTITIES.clear()
                _ITEM_PATHS.clear()
            found = _IDENTITY_CACHE[key] = _work_out_identities(items)
            _CACHED_IDENTITIES.add(id(found))
        return found
    return _work_out_identities(items)


def _work_out_identities(items: Sequence[Any]) -> list[tuple[dict[str, str], str]]:
    per_item: list[dict[str, str]] = []
    for item in items:
        labels: dict[str, str] = {}
        if type(item) is dict or isinstance(item, Mapping):
            for key in IDENTITY_FIELDS:
                text = as_text(item.get(key))
                if text is not None:
                    labels[key] = text
        else:
            if record_fields(type(item)) is not None:
                for key in RECORD_IDENTITY[type(item)]:
                    text = as_text(getattr(item, key))
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


def as_text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None

def list_identities(node: Any, memo: IdentityMemo) -> list[tuple[dict[str, str], str]]:
    """The identities of a list's items, read once per list and evaluation (`memo`)."""
    idents = memo.get(id(node))
    if idents is None:
        idents = memo[id(node)] = identities(node)
    return idents
