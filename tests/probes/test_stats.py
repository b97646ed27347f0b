"""Probe window statistics as pure functions: nearest-rank percentiles, jitter, loss."""

from __future__ import annotations

import pytest

from rigmon.probes.stats import jitter, loss_pct, percentile, window_stats


def test_percentile_is_nearest_rank_and_never_interpolates() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    # Of ten replies the p99 is the worst one, not a value between the two worst.
    assert percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 1000], 99) == 1000.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


def test_jitter_is_the_mean_absolute_difference_of_consecutive_rtts_in_sending_order() -> None:
    assert jitter([100.0, 110.0, 100.0, 130.0]) == pytest.approx((10 + 10 + 30) / 3)
    # Order matters: the same values sorted have less jitter.
    assert jitter([100.0, 130.0, 100.0, 130.0]) == 30.0
    assert jitter([100.0, 100.0, 130.0, 130.0]) == 10.0
    assert jitter([100.0]) is None
    assert jitter([]) is None


@pytest.mark.parametrize(("sent", "received", "expected"), [(100, 95, 5.0), (10, 10, 0.0), (10, 0, 100.0), (0, 0, None),
                                                           (10, 12, 0.0)])
def test_loss(sent: int, received: int, expected: float | None) -> None:
    assert loss_pct(sent, received) == expected


def test_window_stats_of_a_lossy_window() -> None:
    stats = window_stats(20, [200.0, 100.0, 300.0] + [150.0] * 16)
    assert (stats.sent, stats.received) == (20, 19)
    assert stats.loss_pct == 5.0
    assert stats.p50_us == 150.0
    assert stats.p99_us == 300.0
    assert stats.max_us == 300.0
    assert stats.jitter_us == pytest.approx((100 + 200 + 150) / 18)


def test_window_stats_without_replies() -> None:
    stats = window_stats(30, [])
    assert stats.loss_pct == 100.0
    assert stats.p50_us is None and stats.p99_us is None and stats.max_us is None and stats.jitter_us is None
