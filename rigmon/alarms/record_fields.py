"""The fields of the records a selector's match sits in, for an alarm's message: ``{rx_gbps}`` beside a
Thunderbolt link's ``link_state``, ``{raid.name}`` of the array an md member belongs to.

Read only when a message that names such a field is rendered (an alarm raised, or its reading
changed: see `rigmon.alarms.engine`), never for every match of every frame.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rigmon.alarms.selector import IdentityMemo, Selector
from rigmon.alarms.walk import apply_filters, is_scalar, record_items, step_children

#: The records a selector's leaves belong to, by their path (a match's ``subject``): each with the
#: nodes on the way to it, outermost first, under the name of the step that reached them.
RecordChains = dict[str, tuple[tuple[str, Any], ...]]


def record_chains(selector: Selector, data: Mapping[str, Any], memo: IdentityMemo | None = None) -> RecordChains:
    """Every record ``selector``'s steps before its last reach in ``data``, by its path.

    Args:
        selector: the rule's selector (``raid[*].members[*].role``).
        data: frame data or a frame's view, as for `Selector.select`.
        memo: the identities of lists already walked in ``data`` (shared with `Selector.select`, so
            the paths are the matches' subjects).

    Returns:
        ``{"raid[uuid=...].members[name=nvme2n1]": (("raid", array), ("members", member))}``;
        empty for a selector of one step (a top-level scalar belongs to no record).
    """
    memo = {} if memo is None else memo
    current: list[tuple[Any, str, tuple[tuple[str, Any], ...]]] = [(data, "", ())]
    for step in selector.steps[:-1]:
        nxt: list[tuple[Any, str, tuple[tuple[str, Any], ...]]] = []
        for node, path, chain in current:
            for child, child_path, _ in step_children(node, step.name, path, None):
                if step.filters:
                    for item, item_path, _ in apply_filters(child, step.filters, child_path, None, memo):
                        nxt.append((item, item_path, (*chain, (step.name, item))))
                elif child is not None:
                    nxt.append((child, child_path, (*chain, (step.name, child))))
        current = nxt
    return {path: chain for _, path, chain in current if chain}


def message_fields(chain: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """The fields a message may name of a match's records: the innermost record's by their own names
    (``rx_gbps``), every record around it by its step's name and theirs (``raid.name``).

    Only scalars that are there: a field that is ``None`` (not read) or a list is left out, so a
    message naming it renders its rule's fallback, as for any missing field.
    """
    fields: dict[str, Any] = {}
    last = len(chain) - 1
    for i, (step, node) in enumerate(chain):
        if i < last and step == "*":
            continue  # a table entry around the record has no name to write it by
        prefix = "" if i == last else f"{step}."
        for name, value in record_items(node):
            if value is not None and is_scalar(value):
                fields[prefix + name] = value
    return fields
