"""What one rule remembers between frames, and the two updates of it shared by the full and the quiet paths."""

from __future__ import annotations

from collections import deque
from typing import Any

import msgspec


class RuleState(msgspec.Struct):
    """Per-rule memory between frames (a mutable `msgspec.Struct`, tracked by the cycle collector)."""

    latched: dict[str, bool] = msgspec.field(default_factory=dict)
    window: dict[str, deque[tuple[float, float]]] = msgspec.field(default_factory=dict)
    first_seen: dict[str, float] = msgspec.field(default_factory=dict)
    seen: dict[str, dict[str, str]] = msgspec.field(default_factory=dict)
    buckets: dict[str, deque[list[float]]] = msgspec.field(default_factory=dict)
    unchanged: dict[str, tuple[float, int]] = msgspec.field(default_factory=dict)
    #: A quiet counter rule's last update that changed no history (`rigmon.alarms.quiet.counter_update`):
    #: the ``(subject, value)`` list it read (the same object again when nothing under it changed),
    #: the time until which the same list changes nothing again (the first time a history's
    #: window start passes its second sample), and the positions found rising. ``None``: none.
    quiet_pairs: list[tuple[str, Any]] | None = None
    quiet_until: float = 0.0
    quiet_rising: tuple[int, ...] = ()


def stood_still(state: RuleState, subject: str, at: float) -> int:
    """Evaluations for which a staleness rule's timestamp ``at`` has stood still, this one included.

    Old alone is not silent: the timestamp must also have stood still for ``min_frames``
    evaluations (an accelerated simulator makes every sample "old").
    """
    last_at, frames = state.unchanged.get(subject, (at, 0))
    frames = frames + 1 if last_at == at else 1
    state.unchanged[subject] = (at, frames)
    return frames


def counter_history(histories: dict[str, deque[tuple[float, float]]], subject: str, v: float, now: float,
                    start: float) -> deque[tuple[float, float]]:
    """The history of a counter's subject, updated with its value ``v`` at ``now``.

    A history holds the samples where the counter changed (the first of each run of equal
    values): its value at any time is that of the last change before it, as with every sample
    kept, and a quiet counter adds nothing (updating twice with one value changes nothing).
    One change at or before the window's ``start`` is kept, so the increase spans the window.
    """
    hist = histories.get(subject)
    if hist is None:
        hist = histories[subject] = deque()
        hist.append((now, v))
    elif v != hist[-1][1]:
        if v < hist[-1][1]:
            hist.clear()  # counter reset: no honest increase across it
        hist.append((now, v))
    while len(hist) >= 2 and hist[1][0] <= start:
        hist.popleft()
    return hist
