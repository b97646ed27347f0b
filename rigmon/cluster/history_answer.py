"""A ``/v1/history`` answer made on the dashboard side, as an agent's journal makes it, from values in
memory: a replay's recorded frames (`rigmon.cluster.chart.history_from_frames`), or the series the
dashboard holds of a node whose agent cannot answer (`rigmon.cluster.held_history`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from rigmon.schema import SCHEMA_VERSION, Event, History, HistorySeries
from rigmon.series import Stats, add_value

#: The journal's tiers and points per answer (`rigmon.agent.journal.tiers`; the dashboard side
#: does not import the agent), so an answer made here has the shape an agent's would.
TIERS_S = (60, 900)
MAX_POINTS = 1500


def answer_tier(span_s: float, interval_s: float) -> tuple[float, str]:
    """The step (s) and tier of an answer for a window of ``span_s`` seconds: every frame
    (``interval_s`` apart) while the window holds at most `MAX_POINTS` of them, else buckets of
    the finest tier of `TIERS_S` that fits (the coarsest when none does)."""
    if span_s / interval_s <= MAX_POINTS:
        return interval_s, "frames"
    index = next((i for i, s in enumerate(TIERS_S) if span_s / s <= MAX_POINTS), len(TIERS_S) - 1)
    return float(TIERS_S[index]), f"{TIERS_S[index]}s"


def history_answer(rows: Iterable[tuple[float, Mapping[str, float]]], node: str, from_at: float, to_at: float,
                   names: Iterable[str] | None, interval_s: float, events: Sequence[Event] = ()) -> History:
    """The answer for the window ``from_at``..``to_at`` from ``rows`` of values: every row while the
    window holds at most `MAX_POINTS` intervals, else buckets of the finest tier that fits, each with
    the min, mean and max of its rows.

    Args:
        rows: (Unix seconds, series values by name) of each frame, in any order; rows outside the
            window are left out.
        node: node name put in the answer.
        from_at: window start, Unix seconds.
        to_at: window end.
        names: only these series (all when ``None``).
        interval_s: the agent's frame interval.
        events: the node's events; those in the window are the answer's, one of each id, oldest first.
    """
    wanted = None if names is None else set(names)
    step_s, tier = answer_tier(max(0.0, to_at - from_at), interval_s)
    buckets: dict[float, dict[str, Stats]] = {}
    for taken_at, values in rows:
        if not from_at <= taken_at <= to_at:
            continue
        at = taken_at if tier == "frames" else math.floor(taken_at / step_s) * step_s
        stats = buckets.setdefault(at, {})
        for name, value in values.items():
            if wanted is None or name in wanted:
                add_value(stats, name, value)
    columns: dict[str, tuple[list[float], list[float], list[float], list[float]]] = {}
    for at in sorted(buckets):
        for name, s in buckets[at].items():
            col = columns.setdefault(name, ([], [], [], []))
            col[0].append(at)
            col[1].append(s[0])
            col[2].append(s[1] / s[3])
            col[3].append(s[2])
    series = {name: HistorySeries(at=tuple(c[0]), min=tuple(c[1]), mean=tuple(c[2]), max=tuple(c[3]))
              for name, c in sorted(columns.items())}
    seen: dict[str, Event] = {}
    for event in events:
        if from_at <= event.at <= to_at:
            seen.setdefault(event.id, event)
    return History(schema=SCHEMA_VERSION, node=node, from_at=from_at, to_at=to_at, tier=tier, step_s=step_s,
                   series=series, events=tuple(sorted(seen.values(), key=lambda e: e.at)))
