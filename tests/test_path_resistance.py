"""Path resistance estimator: both methods, uncertainty, and the daily trend."""

from __future__ import annotations

import json
import random

import pytest

from rigmon.path_resistance import DAY_S, EstimatorSet, EstimatorState, PathResistanceEstimator
from rigmon.typed import from_data, to_data


def test_two_point_estimate_with_noise_and_uncertainty() -> None:
    rng = random.Random(4)
    est = PathResistanceEstimator("vpsu-v", "two_point")
    for k in range(300):
        amps = rng.uniform(20, 130)
        est.add_drop(amps * 1.75e-3 + rng.gauss(0, 0.002), amps, 1000.0 + k)
    reading = est.reading()
    assert reading.resistance_mohm == pytest.approx(1.75, abs=0.03)
    assert reading.uncertainty_mohm is not None and 0 < reading.uncertainty_mohm < 0.03
    assert reading.points == 300 and reading.trend_mohm_per_day is None


def test_low_current_points_are_ignored() -> None:
    est = PathResistanceEstimator("p", "two_point")
    est.add_drop(0.05, 0.1, 0.0)
    assert est.reading().points == 0 and est.reading().resistance_mohm is None


def test_load_steps_need_current_spread() -> None:
    est = PathResistanceEstimator("rail-v", "load_steps")
    for k in range(20):
        est.add_load_point(12.0 - 30 * 2.5e-3, 30.0, float(k))
    assert est.reading().resistance_mohm is None
    for k in range(20):
        amps = 30.0 if k % 2 else 120.0
        est.add_power_point(12.0 - amps * 2.5e-3, amps * (12.0 - amps * 2.5e-3), 100.0 + k)
    reading = est.reading()
    assert reading.method == "load_steps" and reading.current_span_amps == pytest.approx(90.0, abs=0.01)
    assert reading.resistance_mohm == pytest.approx(2.5, abs=0.01)


def test_trend_over_weeks_and_recent_window() -> None:
    est = PathResistanceEstimator("vpsu-v", "two_point")
    for day in range(21):
        r_ohm = (1.0 + 0.05 * day) * 1e-3
        for k in range(48):
            amps = 40.0 + k
            est.add_drop(amps * r_ohm, amps, day * DAY_S + k * 1800.0)
    reading = est.reading()
    assert reading.trend_mohm_per_day == pytest.approx(0.05, abs=1e-4)
    assert reading.baseline_mohm == pytest.approx(1.0, abs=1e-3) and reading.trend_days == 20.0
    # Only the last quarter hour (at least ten points) is behind the current estimate.
    assert reading.points == 10 and reading.resistance_mohm == pytest.approx(2.0, abs=1e-3)


def feed_days(est: PathResistanceEstimator, days: range) -> None:
    for day in days:
        r_ohm = (1.0 + 0.05 * day) * 1e-3
        for k in range(48):
            amps = 40.0 + k
            est.add_drop(amps * r_ohm, amps, day * DAY_S + k * 1800.0)


def test_the_daily_trend_survives_a_restart_through_its_state() -> None:
    before = PathResistanceEstimator("vpsu-v", "two_point")
    feed_days(before, range(0, 11))
    saved = from_data(EstimatorState, json.loads(json.dumps(to_data(before.export_state()))))
    after = PathResistanceEstimator("vpsu-v", "two_point")
    feed_days(after, range(10, 21))  # restarted during day 10: that day's sums add up
    assert after.restore_state(saved)
    reading = after.reading()
    assert reading.trend_mohm_per_day == pytest.approx(0.05, abs=1e-4) and reading.trend_days == 20.0
    assert reading.baseline_mohm == pytest.approx(1.0, abs=1e-3)
    # Without the saved days the baseline is day 10's, the trend only ten days long.
    fresh = PathResistanceEstimator("vpsu-v", "two_point")
    feed_days(fresh, range(10, 21))
    assert fresh.reading().trend_days == 10.0 and fresh.reading().baseline_mohm == pytest.approx(1.5, abs=1e-3)


def test_a_state_of_another_path_or_method_is_refused() -> None:
    before = PathResistanceEstimator("vpsu-v", "two_point")
    feed_days(before, range(0, 3))
    assert not PathResistanceEstimator("rail-v", "two_point").restore_state(before.export_state())
    other = PathResistanceEstimator("vpsu-v", "load_steps")
    assert not other.restore_state(before.export_state()) and other.export_state().days == ()


def test_an_estimator_set_applies_a_saved_state_when_its_path_first_appears() -> None:
    before = EstimatorSet()
    feed_days(before.get("vpsu-v", "two_point"), range(0, 5))
    after = EstimatorSet()
    assert after.restore_state(before.export_state()) == 1
    assert after.readings() == [] and after.export_state() == before.export_state()  # waiting, still saved
    feed_days(after.get("vpsu-v", "two_point"), range(5, 8))
    (reading,) = after.readings()
    assert reading.trend_days == 7.0 and reading.trend_mohm_per_day == pytest.approx(0.05, abs=1e-4)


def _refit(est: PathResistanceEstimator, recent: list[tuple[float, float, float]]) -> PathResistanceEstimator:
    """An estimator fed only ``recent`` (at, amps, y), with nothing to drop: what a refit gives."""
    fresh = PathResistanceEstimator(est.path, est.method, recent_s=1e12, recent_points=10**9)
    for at, amps, y in recent:
        fresh._add(amps, y, at)
    return fresh


@pytest.mark.parametrize("method", ["two_point", "load_steps"])
def test_recent_fit_kept_up_to_date_is_the_fit_of_the_recent_points(method: str) -> None:
    """The recent estimate is kept as points come and go (by count and by age, and after a
    silence that leaves only the few kept points) and equals a fit of those points afresh."""
    rng = random.Random(7)
    est = PathResistanceEstimator("p", method, recent_s=60.0, recent_points=500)  # type: ignore[arg-type]
    kept: list[tuple[float, float, float]] = []
    at = 1000.0
    for k in range(3000):
        at += 0.1 if k % 1000 else 300.0
        amps = rng.uniform(20, 130) if k % 400 < 350 else 60.0 + k % 3
        y = amps * 1.75e-3 + rng.gauss(0, 0.002) if method == "two_point" else -(12.0 - amps * 2e-3)
        kept.append((at, amps, y))
        if method == "two_point":
            est.add_drop(y, amps, at)
        else:
            est.add_load_point(-y, amps, at)
        kept = kept[-500:]
        while len(kept) > 10 and kept[0][0] < at - 60.0:
            kept.pop(0)
        if k % 97 == 0 or k % 1000 < 3:
            got, want = est.reading(), _refit(est, kept).reading()
            assert got.points == want.points == len(kept)
            assert got.current_span_amps == want.current_span_amps
            for name in ("resistance_mohm", "uncertainty_mohm"):
                a, b = getattr(got, name), getattr(want, name)
                assert (a is None) == (b is None) and (a is None or a == pytest.approx(b, abs=2e-4)), (k, name)


def test_the_recent_fit_covers_fifteen_minutes_of_a_ten_per_second_adc() -> None:
    # README: "fitted ... over the last 15 minutes"; a cap of 4096 points held 6.8 minutes of it.
    est = PathResistanceEstimator("vpsu-v", "two_point")
    for k in range(10 * 1200):  # 20 minutes of windows, 10 a second
        est.add_drop(0.175, 100.0, 1000.0 + k / 10)
    assert est.reading().points == pytest.approx(10 * 900, abs=10)
