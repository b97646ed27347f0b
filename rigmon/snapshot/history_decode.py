"""A node's history of the window for a bundle: an agent's /v1/history answer checked fast, or one made
from whole frames (an agent without a readable journal)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from msgspec.structs import replace

from rigmon.schema import SCHEMA_VERSION, Event, History, HistorySeries, SchemaError, decode_data
from rigmon.series import frame_series


def history_of(node: str, from_at: float, to_at: float, interval_s: float,
                frames: Sequence[tuple[float, bytes]]) -> History:
    """The window's history made from whole frames (every frame a point), as an agent answers it."""
    return history_of_decoded(node, from_at, to_at, interval_s, ((at, json.loads(raw)) for at, raw in frames))


def history_of_decoded(node: str, from_at: float, to_at: float, interval_s: float,
                       frames: Iterable[tuple[float, dict[str, Any]]]) -> History:
    """`history_of` for frames already decoded from their wire JSON: ``(taken_at, frame)``, oldest first."""
    columns: dict[str, tuple[list[float], list[float]]] = {}
    events: list[Event] = []
    for taken_at, data in frames:
        for name, value in frame_series(data).items():
            col = columns.setdefault(name, ([], []))
            col[0].append(taken_at)
            col[1].append(value)
        events += [decode_data(Event, e) for e in data.get("events") or ()]
    series = {name: HistorySeries(at=tuple(at), min=tuple(v), mean=tuple(v), max=tuple(v))
              for name, (at, v) in sorted(columns.items())}
    return History(schema=SCHEMA_VERSION, node=node, from_at=from_at, to_at=to_at, tier="frames",
                   step_s=interval_s, series=series, events=tuple(events))


def decode_history(raw: bytes) -> History:
    """``decode(History, raw)`` with the series checked and built directly.

    The generic decoder walks every number of thousands of series (a large rig's hour);
    this checks the same shape (four lists of numbers of one length per series) far faster.

    Raises:
        SchemaError: not a History.
    """
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SchemaError(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("series"), dict):
        raise SchemaError("bad History: series: expected an object")
    head = decode_data(History, {**data, "series": {}})
    series: dict[str, HistorySeries] = {}
    for name, s in data["series"].items():
        columns: list[list[Any]] = [c for key in ("at", "min", "mean", "max")
                                    if isinstance(s, dict) and isinstance(c := s.get(key), list)]
        try:
            if len(columns) != 4 or len({len(c) for c in columns}) != 1:
                raise TypeError("not four lists of one length")
            # fsum runs in C and raises TypeError on anything but numbers (None, text, lists).
            for c in columns:
                math.fsum(c)
        except TypeError:
            raise SchemaError(f"bad History: series.{name}: expected at, min, mean, max: lists of numbers "
                              "of one length") from None
        at, lo, mean, hi = (tuple(map(float, c)) for c in columns)
        series[name] = HistorySeries(at=at, min=lo, mean=mean, max=hi)
    return replace(head, series=series)
