"""History rings and min/max-preserving downsampling."""

from __future__ import annotations

import math

import pytest

from rigmon.cluster.history import NodeHistory, Ring, downsample, shares


def test_ring_keeps_the_newest_in_order() -> None:
    ring = Ring(3)
    for v in range(5):
        ring.append(float(v))
    assert ring.tail() == [2.0, 3.0, 4.0]
    assert ring.tail(2) == [3.0, 4.0]
    assert len(ring) == 3


def test_a_sag_survives_downsampling_for_voltage() -> None:
    volts = [12.0] * 1000
    volts[517] = 11.31
    reduced = downsample(volts, 50, "min")
    assert len(reduced) == 50
    assert min(reduced) == 11.31


def test_a_peak_survives_downsampling_for_power() -> None:
    watts = [800.0] * 3600
    watts[3599] = 1650.0
    assert max(downsample(watts, 40, "max")) == 1650.0


@pytest.mark.parametrize(
    ("values", "buckets", "extreme", "expected"),
    [
        ([1.0, 5.0, 2.0, 4.0], 2, "min", [1.0, 2.0]),
        ([1.0, 5.0, 2.0, 4.0], 2, "max", [5.0, 4.0]),
        ([1.0, math.nan, 3.0], 10, "max", [1.0, 3.0]),
        ([math.nan, math.nan, 3.0, 4.0], 2, "min", [3.0]),
        ([], 5, "min", []),
    ],
)
def test_downsample_table(values: list[float], buckets: int, extreme: str, expected: list[float]) -> None:
    assert downsample(values, buckets, extreme) == expected  # type: ignore[arg-type]


def test_history_holds_an_hour_and_reports_seqs() -> None:
    history = NodeHistory()
    for seq in range(1, 4001):
        history.append(seq, float(seq), {"cpu_pct": 50.0, "rail_min_volts": None})
    assert len(history) == 3600
    assert history.seqs()[0] == 401 and history.seqs()[-1] == 4000
    assert history.trend("rail_min_volts", None, 10) == ()
    assert history.trend("cpu_pct", 120, 60) == (50.0,) * 60


def test_detail_series_line_up_and_keep_their_extreme() -> None:
    history = NodeHistory(capacity=10, max_details=2)
    history.append(1, 1.0, {}, {"gpu[a].power_w": 200.0})
    history.append(2, 2.0, {}, {"gpu[a].power_w": 300.0, "rail.mean_volts": 11.9})
    history.append(3, 3.0, {}, {"rail.mean_volts": 11.4, "gpu[b].power_w": 5.0})
    history.append(4, 4.0, {}, {"gpu[a].power_w": 250.0, "rail.mean_volts": 11.8})
    # A series seen late starts with nan for the frames before; one beyond the cap is not kept.
    assert set(history.details) == {"gpu[a].power_w", "rail.mean_volts"}
    assert math.isnan(history.details["rail.mean_volts"].tail()[0])
    assert math.isnan(history.details["gpu[a].power_w"].tail()[2])
    assert all(len(ring) == len(history) for ring in history.details.values())
    trends = history.detail_trends(None, 1)
    assert trends == {"gpu[a].power_w": (300.0,), "rail.mean_volts": (11.4,)}


@pytest.mark.parametrize(("name", "extreme"), [
    ("rail.mean_volts", "min"), ("gpu[GPU-1].power_w", "max"), ("raid[md127].read_bytes_per_s", "max"),
    ("path[vpsu-v].resistance_mohm", "max"),
])
def test_detail_extreme_by_unit(name: str, extreme: str) -> None:
    from rigmon.cluster.history import detail_extreme
    assert detail_extreme(name) == extreme


def test_a_gap_in_the_frames_is_a_gap_in_the_trend() -> None:
    # Two minutes of frames, five minutes of nothing (the node was down), two minutes again: before,
    # the trend joined both sides as if they were one stretch.
    history = NodeHistory()
    times = [float(t) for t in range(120)] + [float(t) for t in range(420, 540)]
    for seq, at in enumerate(times, 1):
        history.append(seq, at, {"rail_min_volts": 11.9 if at < 420 else 11.4}, {"gpus[0].power_w": 250.0})
    cuts = history.gaps(None, 3.0)
    assert cuts == [120]
    trend = history.trend("rail_min_volts", None, 60, cuts)
    gaps = [i for i, v in enumerate(trend) if math.isnan(v)]
    assert gaps == [30] and len(trend) == 61
    assert set(trend[:30]) == {11.9} and set(trend[31:]) == {11.4}
    # Without a gap, or with none asked for, as before.
    assert not any(math.isnan(v) for v in history.trend("rail_min_volts", None, 60))
    assert history.gaps(100, 3.0) == [] and history.gaps(None, 400.0) == []
    power = history.detail_trends(None, 60, cuts)["gpus[0].power_w"]
    assert [i for i, v in enumerate(power) if math.isnan(v)] == [30]


def test_shares_are_proportional_and_each_part_gets_one() -> None:
    assert shares([100, 100], 10) == [5, 5]
    assert shares([1000, 1], 10) == [9, 1]
    assert shares([3, 2], 10) == [3, 2]
    assert sum(shares([7, 300, 1, 50], 20)) == 20


def test_frames_spaced_wider_than_the_interval_are_not_gaps_but_a_hole_among_them_is() -> None:
    # `rigmon demo --speed 30`: the agents sample every real second, 30 s apart on their simulated
    # clock, while their interval says 1 s. Before: a cut between every two frames, and the node
    # screen's trends drew a blank bar between every two bars.
    from rigmon.cluster.history import gap_cuts
    steady = [30.0 * n + (1.5 if n % 3 else -2.0) for n in range(60)]
    assert gap_cuts(steady, 3.0) == []
    holed = steady[:30] + [at + 600.0 for at in steady[30:]]
    assert gap_cuts(holed, 3.0) == [30]
    # Frames a second apart on their clock keep the agent's staleness as the limit, as before,
    # also when gaps are most of the steps (a node down more than up) or frames are pushed between ticks.
    flapping = [0.0, 1.0, 2.0, 60.0, 61.0, 200.0, 201.0, 300.0]
    assert gap_cuts(flapping, 3.0) == [3, 5, 7]
    pushed = sorted([float(t) for t in range(100)] + [t + 0.1 for t in range(0, 100, 3)] + [150.0])
    assert gap_cuts(pushed, 3.0) == [len(pushed) - 1]
