"""What the dashboard holds of a node, charted as the agent's journal would chart it: the same series
names, the same extremes, buckets for a long window, the node's events."""

from __future__ import annotations

import math

import pytest

from rigmon.cluster.chart import charts_for, frame_values, history_from_frames
from rigmon.cluster.held_history import held_because, held_history, held_note
from rigmon.cluster.node_store import NodeStore
from rigmon.schema import Frame
from rigmon.summary import summary_record
from tests.tui.snapshot_apps.fake_agent import FakeClock
from tests.tui.snapshot_apps.record_frames import load_frames

WHY = "agent unreachable"


def fed(frames: list[Frame], summaries: bool = False) -> NodeStore:
    """A store fed ``frames`` whole, or (``summaries``) as an off-screen node's summary records."""
    store = NodeStore("http://n:1", "http://n:1", FakeClock())
    if summaries:
        store.add_summaries([summary_record(f) for f in frames])
    else:
        store.add_frames(frames)
    return store


def charted(frames: list[Frame]) -> list[str]:
    """Every series the node's charts ask for."""
    return [name for chart in charts_for(frame_values(frames[-1])) for name in chart.series]


@pytest.mark.parametrize("fixture", ["v100-gpu-lost-rail-sag", "two-raid0-model-load", "strix-amd-gpu"])
@pytest.mark.parametrize("summaries", [False, True], ids=["frames", "summaries"])
def test_held_series_are_the_journals_extremes(fixture: str, summaries: bool) -> None:
    frames = load_frames(fixture)
    store = fed(frames, summaries)
    names = charted(frames)
    start, end = frames[0].taken_at, frames[-1].taken_at
    held = held_history(store, start, end, names, WHY)
    assert held is not None
    journal = history_from_frames(frames, "node01", start, end, names)
    assert held.history.tier == journal.tier == "frames"
    # The rail's minimum, the GPUs' peaks, the arrays' throughput, CPU... as the journal has them.
    assert held.history.series, names
    for name, series in held.history.series.items():
        assert min(series.min) == min(journal.series[name].min), name
        assert max(series.max) == max(journal.series[name].max), name
    # The node's events in the window, oldest first.
    events = [e.id for f in frames for e in f.events if start <= e.at <= end]
    assert sorted(e.id for e in held.history.events) == sorted(events)


def test_a_gpu_is_charted_by_its_index_and_the_rail_by_its_minimum() -> None:
    frames = load_frames("v100-gpu-lost-rail-sag")
    held = held_history(fed(frames), frames[0].taken_at, frames[-1].taken_at, charted(frames), WHY)
    assert held is not None
    series = held.history.series
    assert {f"gpus[{g.index}].power_peak_w" for g in frames[-1].readings.gpus} <= set(series)
    assert "psu_rail.volts.min_volts" in series and "psu_rail.volts.mean_volts" in series
    # The rail's maximum is not held: that line stays empty rather than drawing another figure.
    assert "psu_rail.volts.max_volts" not in series


def test_a_long_window_is_buckets_that_keep_the_sag() -> None:
    frames = load_frames("v100-gpu-lost-rail-sag")
    end = frames[-1].taken_at
    held = held_history(fed(frames), end - 6 * 3600, end, ["psu_rail.volts.min_volts"], WHY)
    assert held is not None and held.history.tier == "60s" and held.history.step_s == 60.0
    lowest = min(f.readings.psu_rail.volts.min_volts for f in frames
                 if f.readings.psu_rail is not None and f.readings.psu_rail.volts is not None)
    assert min(held.history.series["psu_rail.volts.min_volts"].min) == lowest


def test_a_node_never_heard_from_has_nothing_held() -> None:
    store = NodeStore("http://n:1", "http://n:1", FakeClock())
    assert held_history(store, 0.0, 1e10, ["host.cpu_pct"], WHY) is None


@pytest.mark.parametrize(("span_s", "expected"), [
    (None, "agent unreachable: showing the one frame this dashboard holds, at 00:01:40 UTC"),
    (1.0, "agent unreachable: showing the 1 second this dashboard holds, to 00:01:40 UTC"),
    (59.0, "agent unreachable: showing the 59 seconds this dashboard holds, to 00:01:40 UTC"),
    (90.0, "agent unreachable: showing the 2 minutes this dashboard holds, to 00:01:40 UTC"),
    (3599.0, "agent unreachable: showing the 60 minutes this dashboard holds, to 00:01:40 UTC"),
])
def test_the_note_says_how_much_is_held_and_to_when(span_s: float | None, expected: str) -> None:
    assert held_note(WHY, span_s, 100.0) == expected


@pytest.mark.parametrize(("reason", "status", "expected"), [
    ("cannot connect: connection refused", None, "agent unreachable"),
    ("timed out waiting for data", None, "agent unreachable"),
    ("HTTP 404: not found", 404, "no history from the agent (HTTP 404: not found)"),
    ("bad answer: expected an object", None, "no history from the agent (bad answer: expected an object)"),
])
def test_the_note_says_why_it_is_not_the_agents(reason: str, status: int | None, expected: str) -> None:
    assert held_because(reason, status) == expected


def test_missing_values_are_left_out_not_drawn_as_zero() -> None:
    frames = load_frames("v100-gpu-lost-rail-sag")
    held = held_history(fed(frames), frames[0].taken_at, frames[-1].taken_at, charted(frames), WHY)
    assert held is not None
    for series in held.history.series.values():
        assert all(math.isfinite(v) for v in series.min + series.mean + series.max)


def test_a_series_the_dashboard_does_not_keep_says_so() -> None:
    # Link speeds are only in the agent's journal: an empty chart must not read as a silent node.
    frames = load_frames("two-raid0-model-load")
    links = [name for name in charted(frames) if name.startswith("thunderbolt[")]
    held = held_history(fed(frames), frames[0].taken_at, frames[-1].taken_at, links, WHY)
    assert held is not None and not held.history.series
    assert held.note.endswith(" (not this series: only the agent's journal keeps it)"), held.note
    cpu = held_history(fed(frames), frames[0].taken_at, frames[-1].taken_at, ["host.cpu_pct"], WHY)
    assert cpu is not None and "journal" not in cpu.note


def temperature_series(store: NodeStore) -> list[str]:
    """The temperature lines of the charts the node's history offers from what ``store`` holds."""
    return [line.series for chart in charts_for(store.chart_values()) if "temp" in chart.key
            for line in chart.lines]


@pytest.mark.parametrize(("fixture", "summaries"), [
    ("cpu-cooler-failed", False),                      # host sensors, the node screen open
    ("nvme-partitioned-thermal-throttle", False),      # NVMe drives and host sensors
    ("nvme-partitioned-thermal-throttle", True),       # off screen: the drives (a summary record keeps them)
])
def test_held_temperatures_chart_as_the_journal_does(fixture: str, summaries: bool) -> None:
    # Before: "(not this series: only the agent's journal keeps it)" over an empty chart: the dashboard
    # kept no temperature, so a dead node's history had no temperature chart to show.
    frames = load_frames(fixture)
    store = fed(frames, summaries)
    names = temperature_series(store)
    assert names, "no temperature chart offered"
    start, end = frames[0].taken_at, frames[-1].taken_at
    held = held_history(store, start, end, names, WHY)
    assert held is not None and "journal" not in held.note
    journal = history_from_frames(frames, "node01", start, end, names)
    assert set(held.history.series) == set(names)
    for name, series in held.history.series.items():
        # Kept as 4-byte floats, read back to the thousandth of a degree hwmon gives.
        assert max(series.max) == max(journal.series[name].max), name
        assert min(series.min) == min(journal.series[name].min), name


def test_a_node_off_screen_offers_the_temperature_charts_it_showed_before() -> None:
    # The node screen showed the node (whole frames), then it went off screen (summary records, whose slim
    # frames have no host sensor below its critical limit): its history still offers the host sensors' chart.
    frames = load_frames("nvme-partitioned-thermal-throttle")
    store = NodeStore("http://n:1", "http://n:1", FakeClock())
    store.add_frames(frames[:40])
    store.add_summaries([summary_record(f) for f in frames[40:]])
    assert not store.latest_whole and store.latest is not None
    assert not any(t.sensor == "thermal_zone0" for t in store.latest.readings.temperatures)
    keys = [chart.key for chart in charts_for(store.chart_values())]
    assert "nvme_temp" in keys and any(k.startswith("temp:") for k in keys), keys
    assert keys == [chart.key for chart in charts_for(frame_values(frames[-1]))]
