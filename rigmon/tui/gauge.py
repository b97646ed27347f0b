"""Gauges of sparklines: the scale bars are drawn on, the worst value of each bar's period, the level it crosses.

A sparkline scaled from its own minimum to its maximum draws a healthy rail's 0.15 V ripple
as the same cliff as a 0.7 V sag. A `Gauge` fixes the scale where a physical one exists (the
12 V rail on a band around its alarm thresholds, power from 0 to the limit, percentages
0-100, throughput from 0) and names the thresholds whose crossing colours a bar. Pure
functions, no Textual: the cluster rows and the node screen's boxes draw with them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rigmon.cluster.history import shares
from rigmon.summary import RAIL_CRITICAL_VOLTS, RAIL_WARN_VOLTS

#: Heights of a one-line bar: `rigmon.tui.row_lines.BARS` has this many characters.
BAR_LEVELS = 8
#: How a bar is judged against its gauge's thresholds.
BarLevel = Literal["ok", "warn", "bad"]
Extreme = Literal["min", "max"]
#: The 12 V rail's band: from below the critical threshold (11.5 V) to above a healthy idle
#: rail (12.0-12.06 V at the terminals), 0.2 V a bar step.
RAIL_LOW_VOLTS = 11.0
RAIL_HIGH_VOLTS = 12.6


@dataclass(frozen=True, slots=True)
class Gauge:
    """The scale of a sparkline and the thresholds that colour its bars.

    Attributes:
        low: value of the lowest bar; lower values are drawn as the lowest bar.
        high: value of the highest bar (higher values are drawn full); ``None``: the largest
            value drawn (a throughput has no natural top, but its bottom is 0).
        warn: a bar beyond this is drawn in the warning colour.
        bad: a bar beyond this is drawn in the error colour.
        trouble: which side of the thresholds is trouble (``below`` for a rail voltage).
    """

    low: float = 0.0
    high: float | None = None
    warn: float | None = None
    bad: float | None = None
    trouble: Literal["below", "above"] = "above"

    def extent(self, values: Sequence[float]) -> tuple[float, float]:
        """The ``(low, high)`` the bars of ``values`` are drawn between."""
        high = self.high
        if high is None or high <= self.low:
            finite = [v for v in values if not math.isnan(v)]
            high = max(finite, default=self.low)
        if high <= self.low:
            high = self.low + 1.0
        return self.low, high

    def heights(self, values: Sequence[float]) -> list[int]:
        """Bar height of each value, 0 (lowest) to ``BAR_LEVELS - 1``, clipped to the scale."""
        low, high = self.extent(values)
        top = BAR_LEVELS - 1
        out = []
        for value in values:
            ratio = 0.0 if math.isnan(value) else min(1.0, max(0.0, (value - low) / (high - low)))
            out.append(int(ratio * top))
        return out

    def level(self, value: float) -> BarLevel:
        """``bad`` or ``warn`` when ``value`` is beyond that threshold, else ``ok``."""
        if math.isnan(value):
            return "ok"
        if self.trouble == "below":
            if self.bad is not None and value < self.bad:
                return "bad"
            if self.warn is not None and value < self.warn:
                return "warn"
        else:
            if self.bad is not None and value > self.bad:
                return "bad"
            if self.warn is not None and value > self.warn:
                return "warn"
        return "ok"


#: The 12 V rail (its minimum or mean): 11.0-12.6 V, amber below the warning rule's 11.7 V,
#: red below the critical rule's 11.5 V, where GPUs fall off the bus.
RAIL = Gauge(RAIL_LOW_VOLTS, RAIL_HIGH_VOLTS, warn=RAIL_WARN_VOLTS, bad=RAIL_CRITICAL_VOLTS, trouble="below")
#: A percentage (CPU busy): 0-100.
PERCENT = Gauge(0.0, 100.0)
#: A throughput or any quantity without a known top: from 0 to the largest value drawn.
FROM_ZERO = Gauge(0.0, None)


def for_series(name: str) -> Gauge:
    """The gauge of a node trend by its series name: voltages on the rail's band, percentages
    0-100, anything else from 0."""
    if name.endswith("_volts"):
        return RAIL
    if name.endswith("_pct"):
        return PERCENT
    return FROM_ZERO


def power(limit_w: float | None) -> Gauge:
    """GPU power from 0 W to the power limit ``limit_w`` (peaks over it draw a full bar).

    Bars over the limit are not coloured: a V100 peaks above its limit for a fraction of a
    second in every training step, which is normal (DESIGN.md, incident 1).
    """
    return Gauge(0.0, limit_w if limit_w is not None and limit_w > 0 else None)


def link(capacity: float | None) -> Gauge:
    """A link's throughput or speed from 0 to its ``capacity`` (same unit); from 0 to the
    largest value drawn when the capacity is unknown."""
    return Gauge(0.0, capacity if capacity is not None and capacity > 0 else None)


def worst_per_bar(data: Sequence[float], width: int, extreme: Extreme) -> list[float]:
    """Reduce ``data`` (oldest first) to at most ``width`` bars, each the ``extreme`` of its share.

    Bar ``i`` stands for ``data[len * i // width : len * (i + 1) // width]``, so every value is
    in exactly one bar; a rail keeps the minimum (a sag survives), a power the maximum (a peak
    survives). With fewer values than ``width`` each value is a bar.

    A ``nan`` in a trend marks a gap in the frames (`rigmon.cluster.history.downsample_gapped`):
    it stays a bar of its own (``nan``, drawn blank), the stretches on either side sharing the
    other bars in proportion, so that no bar joins both sides. When the bars are too few for
    that, a ``nan`` is skipped like a missing value (a bar of nothing but ``nan`` is ``nan``).
    """
    size = len(data)
    if width < 1 or size == 0:
        return []
    if size <= width:
        return list(data)
    # A sum of finite values is never nan: the test costs little on every redraw of every row.
    if math.isnan(sum(data)):
        gapped = _gapped(data, width, extreme)
        if gapped is not None:
            return gapped
    pick = min if extreme == "min" else max
    out = []
    for index in range(width):
        chunk = [v for v in data[size * index // width:size * (index + 1) // width] if not math.isnan(v)]
        out.append(pick(chunk) if chunk else math.nan)
    return out


def _gapped(data: Sequence[float], width: int, extreme: Extreme) -> list[float] | None:
    """`worst_per_bar` of stretches between gap markers, a ``nan`` bar between each two;
    ``None`` when there is no gap between values, or too few bars for every stretch and gap."""
    parts: list[list[float]] = [[]]
    for value in data:
        if math.isnan(value):
            if parts[-1]:
                parts.append([])
        else:
            parts[-1].append(value)
    parts = [p for p in parts if p]
    room = width - (len(parts) - 1)
    if len(parts) < 2 or room < len(parts):
        return None
    out: list[float] = []
    for part, count in zip(parts, shares([len(p) for p in parts], room)):
        if out:
            out.append(math.nan)
        out += worst_per_bar(part, count, extreme)
    return out


def span_label(seconds: float | None) -> str:
    """A trend's span, short: ``45s``, ``5m``, ``1h``, ``1h30m``; "" when unknown."""
    if seconds is None or seconds <= 0 or math.isnan(seconds):
        return ""
    whole = int(round(seconds))
    if whole < 90:
        return f"{whole}s"
    minutes = int(round(seconds / 60))
    if minutes < 60:
        return f"{minutes}m"
    hours, rest = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{rest:02d}m" if rest else f"{hours}h"
    return f"{int(round(hours / 24))}d"
