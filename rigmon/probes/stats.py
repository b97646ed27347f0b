"""Round-trip statistics of one probe window as pure functions: percentiles, jitter, loss."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(sorted_values: Sequence[float], pct: float) -> float | None:
    """The ``pct`` percentile (0-100) of already sorted values by the nearest-rank method.

    Nearest rank never interpolates, so the p99 of a window is a round trip that really
    happened (of 100 replies, the 99th smallest). ``None`` for no values.
    """
    if not sorted_values:
        return None
    rank = max(1, math.ceil(pct / 100.0 * len(sorted_values)))
    return float(sorted_values[min(rank, len(sorted_values)) - 1])


def jitter(rtts_in_order: Sequence[float]) -> float | None:
    """Mean absolute difference of consecutive round trips, in their order of sending.

    This is RFC 3550's interarrival jitter without its 1/16 smoothing: over a window of a
    few hundred probes the plain mean says the same and does not depend on the window's
    start. ``None`` with fewer than two values.
    """
    if len(rtts_in_order) < 2:
        return None
    total = sum(abs(b - a) for a, b in zip(rtts_in_order, rtts_in_order[1:]))
    return total / (len(rtts_in_order) - 1)


def loss_pct(sent: int, received: int) -> float | None:
    """Share of probes without a reply, in percent; ``None`` when none was sent."""
    if sent <= 0:
        return None
    return 100.0 * max(0, sent - received) / sent


@dataclass(frozen=True, slots=True)
class WindowStats:
    """Statistics of one window; round trips in microseconds, ``None`` without replies."""

    sent: int
    received: int
    loss_pct: float | None
    p50_us: float | None
    p99_us: float | None
    max_us: float | None
    jitter_us: float | None


def window_stats(sent: int, rtts_us_in_order: Sequence[float]) -> WindowStats:
    """Statistics of a window in which ``sent`` probes were answered by ``rtts_us_in_order``.

    Args:
        sent: probes sent in the window whose answer is due (late ones count as lost).
        rtts_us_in_order: round trips of the replies, microseconds, in order of sending.
    """
    ordered = sorted(rtts_us_in_order)
    received = min(len(ordered), sent) if sent else len(ordered)
    return WindowStats(
        sent=sent,
        received=received,
        loss_pct=loss_pct(sent, received),
        p50_us=percentile(ordered, 50),
        p99_us=percentile(ordered, 99),
        max_us=float(ordered[-1]) if ordered else None,
        jitter_us=jitter(rtts_us_in_order),
    )
