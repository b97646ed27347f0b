"""Selectors: small paths that pick readings out of a frame, keeping each item's identity.

A selector is read against the frame's data as JSON (`frame_data`): every field of the
frame's ``readings`` at the top level (``host``, ``net``, ``temperatures``...), plus
``collectors`` (name -> status), ``node`` and ``taken_at``. The engine reads the same from the
frame's records as they are (`frame_view`): a record reads as the dict of its fields and a
tuple as a list, so nothing is converted and the matches are the same.

What a selector picks (its text's grammar, and the errors saying where a text breaks it, are
`rigmon.alarms.selector_text`):

* ``host.cpu_pct``: a field of a single record.
* ``gpus[*].state``: every item of a list; the item's identity becomes the subject.
* ``net[name=eth0].speed_mbps``: items whose field ``name`` equals ``eth0`` (compared as text).
* ``peer_paths[key_mismatch=false,peer_flooded=false].state``: items whose fields equal every
  value given (AND, on the same item). Each ``[...]`` of a step filters what the one before it
  kept, so ``[a=x][b=y]`` reads the items of a list inside the list, not the same item twice.
  A value with a comma or a bracket is quoted (``[name="a,b"]``).
* ``temperatures[0].temp_c``: an item by position.
* ``collectors.*.state``: every value of a table; its key is the identity (label ``key``).

The identity of a list item is the first of `IDENTITY_FIELDS` it has whose value is unique
in the list (``gpus[index=0]``, ``net[name=eth0]``); without one it is its position
(``temperatures[#2]``). A path that leads nowhere (a field that does not exist, a ``null``,
an empty list) matches nothing: missing data is not an error. (The agent refuses a rule whose
path no frame can have, a misspelt field: `rigmon.alarms.frame_paths`.)

This module is the selector; how one step reads a node (fields, table
entries, filtered list items with their identities) and the frame data read are
`rigmon.alarms.walk`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from rigmon.alarms.identities import IDENTITY_FIELDS as IDENTITY_FIELDS, IdentityMemo as IdentityMemo
from rigmon.alarms.selector_text import Filter as Filter, SelectorError as SelectorError, Step as Step, parse_steps
from rigmon.alarms.walk import (
    LISTS,
    SCALARS,
    WalkCarry,
    apply_filters,
    child_values,
    field_getters,
    field_value as field_value,
    filter_values,
    frame_data as frame_data,
    frame_view as frame_view,
    is_list,
    is_scalar,
    item_triples,
    key_paths,
    leaf_pairs,
    make_getter,
    plain_filters,
    same_children,
    step_children,
    unchanging,
)
from rigmon.schema import EventValue

#: Nodes reached (with path and subject) by leading steps of selectors, by those steps.
LevelMemo = dict[tuple["Step", ...], list[tuple[Any, str, str]]]


class Match(msgspec.Struct, frozen=True, gc=False):
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


class Selector(msgspec.Struct, frozen=True, gc=False):
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
                for node, path, subject, labels in current if type(node) in SCALARS or is_scalar(node)]

    def subject_values(self, data: Mapping[str, Any], memo: IdentityMemo | None = None,
                       levels: LevelMemo | None = None,
                       carry: WalkCarry | None = None) -> list[tuple[str, EventValue]]:
        """``(subject, value)`` of every match `select` would give, in the same order, without
        building the matches and their labels (what a rule that keeps memory per subject needs
        on a quiet frame).

        Args:
            data: as for `select`.
            memo: as for `select`.
            levels: the records reached by the steps before the last, by those steps, for the
                selectors of this same ``data`` (the engine passes one per frame: its two NVLink
                rules walk ``gpus[*].nvlinks[*]`` once).
            carry: what the walk found in the previous frame (`WalkCarry`; the engine keeps one):
                pairs read below the same tuples of frozen records as then are the same list.
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
                shared = levels[prefix] = (self._walk_plain(current, 0, last, memo) if carry is None
                                           else self._walk_carried(current, last, memo, levels, carry))
            current, first = shared, last
        elif last > 0:
            current, first = self._walk_plain(current, 0, last, memo), last
        leaf = self.steps[last]
        if leaf.name != "*" and not leaf.filters and first == last:
            if carry is None:
                return leaf_pairs(current, leaf.name)
            held = carry.pairs.get(self.text)
            if held is not None and held[0] is current:
                return held[1]
            pairs = leaf_pairs(current, leaf.name)
            carry.pairs[self.text] = (current, pairs)
            return pairs
        current = self._walk_plain(current, first, last + 1, memo)
        return [(subject or path, node) for node, path, subject in current
                if type(node) in SCALARS or is_scalar(node)]

    def _reach(self, data: Mapping[str, Any], memo: IdentityMemo,
               labelled: bool) -> list[tuple[Any, str, str, dict[str, str] | None]]:
        """Every node the steps lead to, with its path, subject and (when ``labelled``) identity labels."""
        # Level by level: all leaves are at the same depth, so this is document order.
        current: list[tuple[Any, str, str, dict[str, str] | None]] = [(data, "", "", {} if labelled else None)]
        return self._walk_steps(current, 0, len(self.steps), memo)

    def _walk_plain(self, current: list[tuple[Any, str, str]], begin: int, end: int,
                    memo: IdentityMemo) -> list[tuple[Any, str, str]]:
        """As `_walk_steps` without labels: ``(node, path, subject)`` of the nodes ``steps[begin:end]``
        lead to. Fields are read by getters resolved once per record type (`field_getters`), and the
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
                        nxt.extend([(child, p, p) for p, child in zip(key_paths(path, node), node.values())
                                    if child is not None])
                        continue
                    for child, child_path, _ in step_children(node, name, path, None):
                        if filters:
                            for item, item_path in plain_filters(child, filters, child_path, memo):
                                append((item, item_path, subject if leaf else item_path))
                        elif child is not None:
                            append((child, child_path, subject if leaf else child_path))
            else:
                getters = field_getters(name)
                for node, path, subject in current:
                    tp = type(node)
                    get = getters.get(tp)
                    if get is None:
                        get = make_getter(tp, name, getters)
                    child = get(node)
                    if child is None:
                        continue
                    child_path = f"{path}.{name}" if path else name
                    if filters:
                        if leaf:
                            for item, item_path in plain_filters(child, filters, child_path, memo):
                                append((item, item_path, subject))
                        else:
                            nxt.extend(item_triples(child, filters, child_path, memo))
                    else:
                        append((child, child_path, subject if leaf else child_path))
            if not nxt:
                return []
            current = nxt
        return current

    def _walk_carried(self, current: list[tuple[Any, str, str]], last: int, memo: IdentityMemo,
                      levels: LevelMemo, carry: WalkCarry) -> list[tuple[Any, str, str]]:
        """`_walk_plain` of ``steps[:last]`` whose last step, when it reads a field through filters
        (``nvlinks[*]``), gives the nodes of the previous frame again when it reaches the same
        tuples of frozen records under the same paths (see `WalkCarry`). The steps before it are
        shared with other selectors of the frame through ``levels`` (``gpus[*]``)."""
        step = self.steps[last - 1]
        if step.name == "*" or not step.filters:
            return self._walk_plain(current, 0, last, memo)
        if last > 1:
            # Nodes of leading steps do not depend on the selector they lead: every step of a
            # prefix is a step before some selector's leaf.
            before = self.steps[:last - 1]
            shared = levels.get(before)
            if shared is None:
                shared = levels[before] = self._walk_plain(current, 0, last - 1, memo)
            current = shared
        if not current:
            return []
        name = step.name
        getters = field_getters(name)
        children: list[tuple[Any, str]] = []
        for node, path, _ in current:
            tp = type(node)
            get = getters.get(tp)
            if get is None:
                get = make_getter(tp, name, getters)
            child = get(node)
            if child is not None:
                children.append((child, f"{path}.{name}" if path else name))
        prefix = self.steps[:last]
        held = carry.levels.get(prefix)
        if held is not None and same_children(held[0], children):
            return held[1]
        nxt: list[tuple[Any, str, str]] = []
        for child, child_path in children:
            nxt.extend(item_triples(child, step.filters, child_path, memo))
        if unchanging(children):
            carry.levels[prefix] = (children, nxt)
        else:
            carry.levels.pop(prefix, None)
        return nxt

    def _walk_steps(self, current: list[tuple[Any, str, str, dict[str, str] | None]], begin: int, end: int,
                    memo: IdentityMemo) -> list[tuple[Any, str, str, dict[str, str] | None]]:
        """The nodes ``steps[begin:end]`` lead to from ``current``."""
        last = len(self.steps) - 1
        for i in range(begin, end):
            step = self.steps[i]
            nxt: list[tuple[Any, str, str, dict[str, str] | None]] = []
            for node, path, subject, labels in current:
                for child, child_path, child_labels in step_children(node, step.name, path, labels):
                    if step.filters:
                        for item, item_path, item_labels in apply_filters(child, step.filters, child_path,
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
                                       for child in (node.values() if type(node) is dict else child_values(node, name))
                                       if child is not None]
            else:
                getters = field_getters(name)
                children = []
                for node in current:
                    tp = type(node)
                    get = getters.get(tp)
                    if get is None:
                        get = make_getter(tp, name, getters)
                    child = get(node)
                    if child is not None:
                        children.append(child)
            if not filters:
                nxt = children
            elif len(filters) == 1 and filters[0].kind == "all":
                for child in children:
                    if type(child) in LISTS:
                        nxt.extend(child)
                    elif is_list(child):
                        nxt.extend(filter_values(child, filters))
            else:
                for child in children:
                    nxt.extend(filter_values(child, filters))
            if not nxt:
                return []
            current = nxt
        return [v for v in current if type(v) in SCALARS or is_scalar(v)]

    @property
    def field(self) -> str:
        """Name of the last step (the reading's field, ``state``, ``speed_mbps``)."""
        return self.steps[-1].name


def parse_selector(text: str) -> Selector:
    """Parse a selector (the grammar and its errors: `rigmon.alarms.selector_text`).

    Raises:
        SelectorError: empty, or where the text breaks the grammar: the step or filter and its column.
    """
    text = text.strip()
    return Selector(text=text, steps=parse_steps(text))
