"""Path resistance: the baseline (the first day's estimate) outlives the 120 days of daily fits kept."""

from __future__ import annotations

import json

import pytest

from rigmon.path_resistance import DAY_S, TREND_DAYS_KEPT, EstimatorState, PathResistanceEstimator
from rigmon.typed import from_data, to_data


def r_mohm(day: int) -> float:
    return 1.0 + 0.01 * day


def feed(est: PathResistanceEstimator, days: range) -> None:
    for day in days:
        for k in range(24):
            amps = 30.0 + 4 * k
            est.add_drop(amps * r_mohm(day) / 1000, amps, day * DAY_S + k * 3600.0)


def round_trip(state: EstimatorState) -> EstimatorState:
    return from_data(EstimatorState, json.loads(json.dumps(to_data(state))))


def test_the_first_days_estimate_stays_the_baseline_past_the_days_kept() -> None:
    est = PathResistanceEstimator("vpsu-v", "two_point")
    feed(est, range(0, TREND_DAYS_KEPT - 2))
    for day in range(TREND_DAYS_KEPT - 2, TREND_DAYS_KEPT + 5):
        feed(est, range(day, day + 1))
        reading = est.reading()
        assert reading.baseline_mohm == pytest.approx(1.0, abs=1e-4), day
        assert reading.trend_mohm_per_day == pytest.approx(0.01, abs=1e-4), day
    assert len(est.export_state().days) == TREND_DAYS_KEPT


def test_the_baseline_survives_a_restart_after_its_day_left() -> None:
    before = PathResistanceEstimator("vpsu-v", "two_point")
    feed(before, range(0, TREND_DAYS_KEPT + 3))
    saved = round_trip(before.export_state())
    assert saved.days[0].day == 3 and saved.baseline_day == 0
    after = PathResistanceEstimator("vpsu-v", "two_point")
    feed(after, range(TREND_DAYS_KEPT + 3, TREND_DAYS_KEPT + 4))  # restarted on a later day
    assert after.restore_state(saved)
    assert after.reading().baseline_mohm == pytest.approx(1.0, abs=1e-4)
    # ... and across a second restart, before the agent reads anything.
    again = PathResistanceEstimator("vpsu-v", "two_point")
    assert again.restore_state(round_trip(after.export_state()))
    feed(again, range(TREND_DAYS_KEPT + 4, TREND_DAYS_KEPT + 5))
    assert again.reading().baseline_mohm == pytest.approx(1.0, abs=1e-4)


def test_a_state_saved_by_an_older_agent_still_loads() -> None:
    before = PathResistanceEstimator("vpsu-v", "two_point")
    feed(before, range(0, 5))
    data = to_data(before.export_state())
    assert isinstance(data, dict)
    old = {key: data[key] for key in ("path", "method", "first_day", "days")}
    saved = from_data(EstimatorState, json.loads(json.dumps(old)))
    assert saved.offset_volts is None and saved.baseline_day is None and saved.baseline_mohm is None
    after = PathResistanceEstimator("vpsu-v", "two_point")
    assert after.restore_state(saved)
    reading = after.reading()
    assert reading.baseline_mohm == pytest.approx(1.0, abs=1e-4) and reading.trend_days == 4.0


def test_days_without_an_estimate_hold_no_baseline() -> None:
    """``load_steps`` on a node idle on its first day: the baseline is the first day with load steps,
    also after the idle day (and then that one) left the days kept."""
    est = PathResistanceEstimator("rail-v", "load_steps")
    for k in range(24):
        est.add_load_point(12.0 - 27.0 * 1e-3, 27.0, k * 3600.0)
    assert est.reading().baseline_mohm is None
    for day in range(1, TREND_DAYS_KEPT + 3):
        for k in range(24):
            amps = 30.0 + 4 * k
            est.add_load_point(12.0 - amps * r_mohm(day) / 1000, amps, day * DAY_S + k * 3600.0)
        assert est.reading().baseline_mohm == pytest.approx(r_mohm(1), abs=1e-4), day
    after = PathResistanceEstimator("rail-v", "load_steps")
    assert after.restore_state(round_trip(est.export_state()))
    assert after.reading().baseline_mohm == pytest.approx(r_mohm(1), abs=1e-4)


def test_a_baseline_an_older_agent_already_lost_is_not_replaced_by_a_later_day() -> None:
    before = PathResistanceEstimator("vpsu-v", "two_point")
    feed(before, range(0, 5))
    state = before.export_state()
    # What an agent before the baseline was kept saved after its first day had left.
    lost = EstimatorState(path=state.path, method=state.method, first_day=state.first_day, days=state.days[2:])
    after = PathResistanceEstimator("vpsu-v", "two_point")
    assert after.restore_state(round_trip(lost))
    reading = after.reading()
    assert reading.baseline_mohm is None and reading.trend_mohm_per_day == pytest.approx(0.01, abs=1e-4)
