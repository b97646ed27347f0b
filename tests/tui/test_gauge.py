"""Sparkline gauges: a physical scale, the worst value of each bar's period, colours by threshold."""

from __future__ import annotations

import math

from rich.color import Color

from rigmon.tui import gauge, row_lines
from rigmon.tui.gauge import RAIL, worst_per_bar

LOW = Color.from_rgb(0, 0, 100)
HIGH = Color.from_rgb(0, 0, 200)
WARN = Color.from_rgb(200, 150, 0)
BAD = Color.from_rgb(220, 0, 0)


def bars(segments: list) -> str:  # type: ignore[type-arg]
    return "".join(s.text for s in segments)


def test_ripple_looks_like_ripple_and_a_sag_like_a_cliff() -> None:
    ripple = [12.0, 11.85] * 30
    sag = [12.0] * 29 + [11.3] + [12.0] * 30
    ripple_heights = set(RAIL.heights(worst_per_bar(ripple, 30, "min")))
    sag_heights = RAIL.heights(worst_per_bar(sag, 30, "min"))
    # Min-to-max scaling drew both as full cliffs; on the rail's band ripple is a bar step at most.
    assert max(ripple_heights) - min(ripple_heights) <= 1
    assert max(sag_heights) - min(sag_heights) >= 3


def test_rail_band_is_fixed_and_clips() -> None:
    assert RAIL.extent([11.9, 12.0]) == (11.0, 12.6)
    assert RAIL.heights([10.2, 11.0, 12.6, 13.5]) == [0, 0, 7, 7]


def test_worst_value_of_each_bar_survives() -> None:
    data = [12.0, 12.0, 11.26, 12.0, 12.0, 12.0, 12.0, 12.0]
    assert worst_per_bar(data, 4, "min") == [12.0, 11.26, 12.0, 12.0]
    power = [100.0, 380.0, 120.0, 110.0]
    assert worst_per_bar(power, 2, "max") == [380.0, 120.0]
    # Every value is in exactly one bar, whatever the ratio.
    assert worst_per_bar(list(range(10)), 3, "max") == [2, 5, 9]
    assert worst_per_bar([1.0, math.nan, math.nan, 2.0], 2, "min")[0] == 1.0
    assert math.isnan(worst_per_bar([math.nan, math.nan, 1.0, 2.0], 2, "min")[0])
    assert worst_per_bar([1.0, 2.0], 5, "min") == [1.0, 2.0]


def test_levels_by_threshold() -> None:
    assert RAIL.level(12.0) == "ok"
    assert RAIL.level(11.6) == "warn"
    assert RAIL.level(11.26) == "bad"
    above = gauge.Gauge(0, 100, warn=80, bad=95)
    assert [above.level(v) for v in (50, 90, 99)] == ["ok", "warn", "bad"]


def test_power_from_zero_to_the_limit_and_never_amber() -> None:
    scale = gauge.power(300.0)
    assert scale.heights([0.0, 150.0, 300.0, 380.0]) == [0, 3, 7, 7]
    assert scale.level(380.0) == "ok"
    # Without a limit: from 0 to the largest value drawn, so a flat line is not a cliff.
    assert gauge.power(None).heights([100.0, 101.0]) == [6, 7]
    assert gauge.FROM_ZERO.heights([0.0, 0.0]) == [0, 0]


def test_sparkline_colours_bars_by_the_threshold_they_cross() -> None:
    data = [12.0] * 10 + [11.6] * 10 + [11.26] * 10
    segments = row_lines.sparkline(data, 3, LOW, HIGH, "min", RAIL, WARN, BAD)
    assert bars(segments) == "▅▃▂"
    assert [s.style.color.triplet for s in segments] == [  # type: ignore[union-attr]
        (0, 0, int(100 + 100 * 4 / 7)), WARN.triplet, BAD.triplet]


def test_sparkline_without_gauge_is_unchanged() -> None:
    # The old min-to-max drawing (what Textual's Sparkline draws) stays for callers without a gauge.
    assert bars(row_lines.sparkline([1.0, 2.0, 3.0, 4.0], 4, LOW, HIGH, "max")) == "▁▃▅█"


def test_span_label() -> None:
    assert gauge.span_label(None) == ""
    assert gauge.span_label(45) == "45s"
    assert gauge.span_label(599) == "10m"
    assert gauge.span_label(3600) == "1h"
    assert gauge.span_label(5400) == "1h30m"
    assert gauge.span_label(3 * 86400) == "3d"
