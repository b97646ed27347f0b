"""Path resistance (`two_point`) with a constant offset between the ADC's two voltage channels.

Two INA226s or an ADS1115 pair disagree by a few millivolts at zero current. Fitted through the
origin, 3 mV reads as 0.1-0.15 mOhm more at idle (25-30 A) than under training (30-130 A).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import pytest

from rigmon.path_resistance import DAY_S, TREND_DAYS_KEPT, EstimatorState, PathResistanceEstimator
from rigmon.typed import from_data, to_data

OFFSET_V = 0.003
R_MOHM = 0.8
POINTS_PER_DAY = 144  # one every ten minutes


def feed(est: PathResistanceEstimator, days: range, amps_of: Callable[[random.Random], float],
         r_mohm: Callable[[int], float], rng: random.Random) -> None:
    """Points of ``days``: drop = offset + R I, with half a millivolt of noise, in whole millivolts (RM1)."""
    for day in days:
        for k in range(POINTS_PER_DAY):
            amps = amps_of(rng)
            drop = OFFSET_V + amps * r_mohm(day) / 1000 + rng.gauss(0, 0.0005)
            est.add_drop(round(drop, 3), amps, day * DAY_S + k * DAY_S / POINTS_PER_DAY)


def training(rng: random.Random) -> float:
    return rng.uniform(30, 130)


def idle(rng: random.Random) -> float:
    return rng.uniform(25, 30)


def test_a_constant_channel_offset_does_not_move_the_estimate_from_training_to_idle() -> None:
    rng = random.Random(11)
    est = PathResistanceEstimator("vpsu-v", "two_point")
    feed(est, range(0, 14), training, lambda _day: R_MOHM, rng)
    trained = est.reading()
    assert trained.resistance_mohm == pytest.approx(R_MOHM, abs=0.01)
    assert trained.trend_mohm_per_day == pytest.approx(0.0, abs=0.001)
    feed(est, range(14, 21), idle, lambda _day: R_MOHM, rng)
    idled = est.reading()
    # The path did not change: neither the current estimate (what the trend alarm watches) nor
    # the daily estimates (the trend and its baseline) may move.
    assert idled.resistance_mohm == pytest.approx(R_MOHM, abs=0.01)
    assert idled.trend_mohm_per_day == pytest.approx(0.0, abs=0.001)
    assert idled.baseline_mohm == pytest.approx(R_MOHM, abs=0.01) and idled.trend_days == 20.0


def test_a_corroding_connection_shows_as_fast_with_a_channel_offset() -> None:
    """R rising 0.02 mOhm a day reads so from the third day on, through training and idle alike."""
    rng = random.Random(12)
    est = PathResistanceEstimator("vpsu-v", "two_point")

    def rising(day: int) -> float:
        return R_MOHM + 0.02 * day

    for day in range(0, 28):
        feed(est, range(day, day + 1), training if day < 14 else idle, rising, rng)
        reading = est.reading()
        assert reading.resistance_mohm == pytest.approx(rising(day), abs=0.02), day
        if day >= 2:
            assert reading.trend_mohm_per_day == pytest.approx(0.02, abs=0.003), day
    assert reading.baseline_mohm == pytest.approx(R_MOHM, abs=0.01)


def test_idle_without_spread_and_no_offset_learned_reports_no_estimate_rather_than_a_biased_one() -> None:
    est = PathResistanceEstimator("vpsu-v", "two_point")
    for k in range(100):
        est.add_drop(OFFSET_V + 27.0 * R_MOHM / 1000, 27.0, 1000.0 + k)
    reading = est.reading()
    assert reading.points == 100 and reading.resistance_mohm is None and reading.baseline_mohm is None
    # A later spell of load steps teaches the offset; the idle day then has its estimate too.
    for k in range(100):
        amps = 30.0 if k % 2 else 120.0
        est.add_drop(OFFSET_V + amps * R_MOHM / 1000, amps, DAY_S + k)
    reading = est.reading()
    assert reading.resistance_mohm == pytest.approx(R_MOHM, abs=1e-4)
    assert reading.baseline_mohm == pytest.approx(R_MOHM, abs=1e-4) and reading.trend_days == 1.0
    for k in range(100):
        est.add_drop(OFFSET_V + 27.0 * R_MOHM / 1000, 27.0, 2 * DAY_S + k)
    assert est.reading().resistance_mohm == pytest.approx(R_MOHM, abs=1e-4)


def test_the_offset_outlives_the_days_it_was_learned_from_and_a_restart() -> None:
    """Months of idle after training: the days with spread have left, their offset has not."""
    rng = random.Random(13)
    est = PathResistanceEstimator("vpsu-v", "two_point")
    feed(est, range(0, 3), training, lambda _day: R_MOHM, rng)
    feed(est, range(3, 3 + TREND_DAYS_KEPT + 2), lambda _rng: 27.0, lambda _day: R_MOHM, rng)
    saved = from_data(EstimatorState, json.loads(json.dumps(to_data(est.export_state()))))
    assert all(day.x_max - day.x_min < 1 for day in saved.days)
    assert saved.offset_volts == pytest.approx(OFFSET_V, abs=2e-4)
    assert est.reading().resistance_mohm == pytest.approx(R_MOHM, abs=0.01)
    after = PathResistanceEstimator("vpsu-v", "two_point")
    assert after.restore_state(saved)
    feed(after, range(TREND_DAYS_KEPT + 5, TREND_DAYS_KEPT + 6), lambda _rng: 27.0, lambda _day: R_MOHM, rng)
    reading = after.reading()
    assert reading.resistance_mohm == pytest.approx(R_MOHM, abs=0.01)
    assert reading.trend_mohm_per_day == pytest.approx(0.0, abs=0.001)


def test_an_older_agents_state_teaches_the_offset_through_its_days() -> None:
    rng = random.Random(14)
    before = PathResistanceEstimator("vpsu-v", "two_point")
    feed(before, range(0, 3), training, lambda _day: R_MOHM, rng)
    data = to_data(before.export_state())
    assert isinstance(data, dict)
    old = {key: data[key] for key in ("path", "method", "first_day", "days")}  # no offset_volts
    after = PathResistanceEstimator("vpsu-v", "two_point")
    assert after.restore_state(from_data(EstimatorState, json.loads(json.dumps(old))))
    feed(after, range(3, 4), lambda _rng: 27.0, lambda _day: R_MOHM, rng)
    assert after.reading().resistance_mohm == pytest.approx(R_MOHM, abs=0.01)


def test_one_transient_at_idle_does_not_make_a_line_of_its_own() -> None:
    """Idle at a steady 27 A with one 35 A transient: a span of 8 A, but a line through the points
    would be the transient's rounding (RM1 sends whole millivolts); the learned offset is used."""
    rng = random.Random(15)
    est = PathResistanceEstimator("vpsu-v", "two_point")
    feed(est, range(0, 2), training, lambda _day: R_MOHM, rng)
    at = 2 * DAY_S
    for k in range(600):
        amps = 35.0 if 300 <= k < 303 else 27.0
        est.add_drop(round(OFFSET_V + amps * R_MOHM / 1000, 3), amps, at + k)
    reading = est.reading()
    assert reading.current_span_amps == 8.0
    assert reading.resistance_mohm == pytest.approx(R_MOHM, abs=0.02)
    assert reading.trend_mohm_per_day == pytest.approx(0.0, abs=0.01)
