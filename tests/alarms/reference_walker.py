"""The selector walker as it was before selectors read frames' records directly (round 3 of
issue 19): plain recursion over `frame_data`'s dicts and lists. Kept as the reference the
engine's selectors are checked against (`test_selector_equivalence.py`); not used by rigmon."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rigmon.alarms.selector import IDENTITY_FIELDS, Filter, IdentityMemo, Match, Selector, Step


def reference_select(selector: Selector, data: Mapping[str, Any]) -> list[Match]:
    """Every scalar ``selector`` reaches in plain ``data``, as the recursive walker found them."""
    out: list[Match] = []
    _walk(data, selector.steps, 0, "", "", {}, out, {})
    return out


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
                if flt.kind == "equals" and not (isinstance(item, Mapping) and all(
                        _text(item.get(name)) == value for name, value in ((flt.field, flt.value), *flt.also))):
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
