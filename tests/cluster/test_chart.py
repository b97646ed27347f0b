"""The history view's data: charts a node offers, window zoom and pan, lines from /v1/history answers."""

from __future__ import annotations

import math

import httpx
import pytest
from msgspec.structs import replace

from rigmon.cluster.chart import (
    DEFAULT_SPAN_S,
    ZOOM_SPANS_S,
    Window,
    charts_for,
    clock_label,
    frame_values,
    history_from_frames,
    keep_events,
    opening_span_s,
    plot_data,
    time_ticks,
    value_ticks,
)
from rigmon.cluster.client import AgentClient, AgentError
from rigmon.schema import SCHEMA_VERSION, Event, History, HistorySeries, encode
from tests.tui.snapshot_apps.record_frames import load_frames

SAG_FIXTURE = "v100-gpu-lost-rail-sag"


def rail_history(at: list[float], mins: list[float]) -> History:
    means = [m + 0.2 for m in mins]
    maxes = [m + 0.3 for m in mins]
    series = {"psu_rail.volts.min_volts": HistorySeries(tuple(at), tuple(mins), tuple(mins), tuple(mins)),
              "psu_rail.volts.mean_volts": HistorySeries(tuple(at), tuple(means), tuple(means), tuple(means)),
              "psu_rail.volts.max_volts": HistorySeries(tuple(at), tuple(maxes), tuple(maxes), tuple(maxes))}
    return History(schema=SCHEMA_VERSION, node="n", from_at=at[0], to_at=at[-1], tier="frames", step_s=1.0,
                   series=series)


def test_charts_of_a_v100_node_with_a_lost_gpu() -> None:
    frames = load_frames(SAG_FIXTURE)
    charts = {c.key: c for c in charts_for(frame_values(frames[-1]))}
    # Its temperatures after (a recording older than the boot-stable sensor names: a chart per hwmonN).
    assert list(charts) == ["rail", "gpu_power", "path", "cpu", "temp:thermal zones", "temp:hwmon0", "temp:hwmon20",
                            "temp:hwmon21"]
    rail = charts["rail"]
    assert [(line.series, line.stat) for line in rail.lines][0] == ("psu_rail.volts.min_volts", "min")
    assert [t.value for t in rail.thresholds] == [11.7, 11.5]
    power = charts["gpu_power"]
    # The lost GPU 3 reports no power now but keeps its line: its last minutes matter.
    assert [line.label for line in power.lines] == ["GPU 0", "GPU 1", "GPU 2", "GPU 3"]
    assert all(line.series.endswith("power_peak_w") and line.stat == "max" for line in power.lines)
    assert [t.value for t in power.thresholds] == [300.0]


def test_charts_of_links_and_arrays() -> None:
    charts = {c.key: c for c in charts_for(frame_values(load_frames("enclosure-link-10g-array-lagging")[-1]))}
    assert charts["links"].series == ("thunderbolt[0-1].rx_gbps", "thunderbolt[1-1].rx_gbps")
    assert all(line.stat == "min" for line in charts["links"].lines)
    assert [t.value for t in charts["links"].thresholds] == [40.0]
    assert charts["storage"].divide == 1e6
    assert charts_for({}) == []


def test_the_sag_minimum_is_the_lowest_point_drawn() -> None:
    at = [1000.0 + i for i in range(10)]
    history = rail_history(at, [12.0, 11.9, 11.95, 11.26, 12.0, 11.9, 12.0, 11.95, 12.0, 11.9])
    chart = charts_for({"psu_rail.volts.min_volts": 12.0})[0]
    plotted = plot_data(chart, history, Window(1009.0, 60.0))
    assert plotted.lowest == 11.26
    assert plotted.lines[0].label == "min" and min(plotted.lines[0].ys) == 11.26
    # x is seconds since the window's start.
    assert plotted.lines[0].xs[0] == pytest.approx(1000.0 - (1009.0 - 60.0))
    # The axis holds the data, the thresholds and the rail's band.
    assert plotted.y_low < 11.0 and plotted.y_high > 12.6


def test_points_outside_the_window_and_info_events_are_left_out() -> None:
    at = [1000.0 + i for i in range(10)]
    history = replace(rail_history(at, [12.0] * 5 + [11.3] + [12.0] * 4), events=(
        Event(id="1", at=1001.0, kind="agent_started", severity="info", subject="node:n", message="started"),
        Event(id="2", at=1005.0, kind="gpu_lost", severity="critical", subject="gpu:3", message="GPU 3 lost"),
        Event(id="3", at=900.0, kind="xid", severity="critical", subject="gpu:3", message="old"),
        Event(id="4", at=1007.0, kind="mark", severity="info", subject="node:n", message="epoch 3 checkpoint"),
        # A worker's exit after the loss, its exit code not seen (torchrun reaped it): info, but the
        # run's end in the incident, as on the node's incident timeline; a clean exit of its own is not.
        Event(id="5", at=1006.0, kind="gpu_process_exited", severity="info", subject="gpu:3",
              message="python3 train.py (pid 4245) exited on GPU 3, exit seen 1.0 s after GPU 3 was lost",
              data={"after_event": "2"}),
        Event(id="6", at=1008.0, kind="gpu_process_exited", severity="info", subject="gpu:0",
              message="python3 eval.py (pid 5000) exited (exit code 0) on GPU 0"),
    ))
    chart = charts_for({"psu_rail.volts.min_volts": 12.0})[0]
    plotted = plot_data(chart, history, Window(1004.0, 4.0))
    assert plotted.lowest == 12.0
    # The job's marks are info events too, but they are what the job wants on the chart.
    assert [e.id for e in plot_data(chart, history, Window(1009.0, 60.0)).events] == ["2", "5", "4"]


def _event(n: int, at: float, kind: str, severity: str, **data: str) -> Event:
    return Event(id=f"r-{n}", at=at, kind=kind, severity=severity, subject="gpu:3", message=f"{kind} {n}",
                 data=data)


def incident_with_marks() -> list[Event]:
    """The QA run on the undervolt rig: rail alarms, an Xid reported by NVML and the kernel log, the
    GPU lost, the rail's warning again, then the job's twelve marks after it (eighteen events)."""
    return [
        _event(1, 1012.0, "alarm_firing", "warning"),
        _event(2, 1012.1, "alarm_firing", "critical"),
        _event(3, 1019.0, "xid", "critical", source="nvml", xid="79"),
        _event(4, 1019.1, "xid", "critical", source="kmsg", xid="79"),
        _event(5, 1020.0, "alarm_firing", "critical"),
        _event(6, 1021.0, "gpu_lost", "critical"),
        _event(7, 1026.0, "alarm_firing", "warning"),
        *(_event(10 + n, 1040.0 + n, "mark", "info") for n in range(11)),
    ]


def test_a_full_chart_keeps_the_incidents_start_and_counts_the_window() -> None:
    """Before: the newest 12 of the window (the marks after the loss): the rail alarms, the Xid and the
    lost GPU that started the incident were gone from the chart."""
    from rigmon.tui.event_merge import merge_xid_events

    history = replace(rail_history([1000.0 + i for i in range(60)], [12.0] * 60), events=tuple(incident_with_marks()))
    chart = charts_for({"psu_rail.volts.min_volts": 12.0})[0]
    plotted = plot_data(chart, history, Window(1060.0, 60.0))
    # Every warning and critical event, then the marks nearest the incident, in time order.
    assert [e.id for e in plotted.events] == [f"r-{n}" for n in (1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14)]
    assert plotted.window_events == 18
    # The Xid's two reports are one event before the chart chooses and counts: one more mark kept.
    merged = plot_data(chart, history, Window(1060.0, 60.0), merge=merge_xid_events)
    assert [e.kind for e in merged.events] == ["alarm_firing", "alarm_firing", "xid", "alarm_firing", "gpu_lost",
                                               "alarm_firing"] + ["mark"] * 6
    assert merged.window_events == 17


def test_keep_events_orders_by_severity_then_nearness_to_the_incidents_start() -> None:
    events = [
        _event(1, 100.0, "mark", "info"),  # long before the incident
        _event(2, 190.0, "mark", "info"),  # what the job was doing when it began
        _event(3, 200.0, "alarm_firing", "warning"),  # the incident's start
        _event(4, 210.0, "gpu_lost", "critical"),
        _event(5, 215.0, "alarm_firing", "warning"),
        _event(6, 230.0, "alarm_firing", "critical"),
        _event(7, 205.0, "mark", "info"),
    ]
    assert [e.id for e in keep_events(events, 2)] == ["r-4", "r-6"]
    assert [e.id for e in keep_events(events, 4)] == ["r-3", "r-4", "r-5", "r-6"]
    # Then the marks nearest the start (205 s, 190 s), oldest first on the chart.
    assert [e.id for e in keep_events(events, 6)] == ["r-2", "r-3", "r-7", "r-4", "r-5", "r-6"]
    assert [e.id for e in keep_events(events, 10)] == ["r-1", "r-2", "r-3", "r-7", "r-4", "r-5", "r-6"]
    # Marks alone (a healthy run): the newest, where the job is now. Before, the first ones: a job marking
    # every 30 s had its last marks (the one just put with `rigmon mark` among them) missing from the chart.
    marks = [_event(n, 100.0 + n, "mark", "info") for n in range(5)]
    assert [e.id for e in keep_events(marks, 2)] == ["r-3", "r-4"]
    assert keep_events(marks, 0) == ()


def test_zoom_steps_and_pan_never_passes_now() -> None:
    window = Window(10_000.0)
    assert window.span_s == DEFAULT_SPAN_S
    out = window.zoom(1)
    assert out.span_s == 3600.0 and out.end_at == 10_000.0
    assert Window(10_000.0, ZOOM_SPANS_S[-1]).zoom(1).span_s == ZOOM_SPANS_S[-1]
    assert Window(10_000.0, ZOOM_SPANS_S[0]).zoom(-1).span_s == ZOOM_SPANS_S[0]
    earlier = window.pan(-1, now=10_000.0)
    assert earlier.end_at == 10_000.0 - DEFAULT_SPAN_S / 2
    assert earlier.pan(5, now=10_000.0).end_at == 10_000.0


def test_opening_span_covers_what_the_dashboard_has_seen() -> None:
    assert opening_span_s(None) == DEFAULT_SPAN_S
    assert opening_span_s(50.0) == 60.0
    assert opening_span_s(200.0) == 300.0
    assert opening_span_s(7200.0) == DEFAULT_SPAN_S


def test_time_ticks_on_round_times() -> None:
    window = Window(1_767_225_600.0 + 900, 900.0)  # 00:00-00:15 UTC
    ticks = time_ticks(window, 6)
    assert [label for _, label in ticks] == ["00:00", "00:05", "00:10", "00:15"]
    assert ticks[0][0] == 0.0
    assert clock_label(1_767_225_630.0, 30.0) == "00:00:30"
    assert clock_label(1_767_225_600.0, 3600.0, 3 * 86400.0) == "01-01 00:00"


def test_history_from_frames_keeps_min_mean_max_per_bucket() -> None:
    frames = load_frames(SAG_FIXTURE)
    start, end = frames[0].taken_at, frames[-1].taken_at
    names = ["psu_rail.volts.min_volts"]
    whole = history_from_frames(frames, "n", start, end, names)
    assert whole.tier == "frames"
    lowest = min(f.readings.psu_rail.volts.min_volts for f in frames
                 if f.readings.psu_rail is not None and f.readings.psu_rail.volts is not None)
    assert min(whole.series[names[0]].min) == lowest
    assert list(whole.series) == names
    assert any(e.kind == "gpu_lost" for e in whole.events)
    # A week's window: 900 s buckets, whose minimum is still the sag's.
    week = history_from_frames(frames, "n", end - 7 * 86400, end, names)
    assert week.tier == "900s" and min(week.series[names[0]].min) == lowest
    assert len(week.series[names[0]].at) <= 2
    mean = week.series[names[0]].mean[-1]
    assert lowest < mean and not math.isnan(mean)


async def test_client_asks_history_for_a_window_and_series() -> None:
    seen: list[httpx.Request] = []
    answer = rail_history([1.0, 2.0], [12.0, 11.3])

    async def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=encode(answer))

    client = AgentClient("http://node.test:9871", transport=httpx.MockTransport(handle))
    history = await client.history(100.0, 200.5, ["psu_rail.volts.min_volts", "host.cpu_pct"])
    await client.aclose()
    assert history.series["psu_rail.volts.min_volts"].min == (12.0, 11.3)
    params = seen[0].url.params
    assert seen[0].url.path == "/v1/history"
    assert (params["from"], params["to"]) == ("100.0", "200.5")
    assert params["series"] == "psu_rail.volts.min_volts,host.cpu_pct"
    assert "frames" not in params


async def test_client_history_says_why_there_is_none() -> None:
    async def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"error": "this agent keeps no journal"})

    client = AgentClient("http://node.test:9871", transport=httpx.MockTransport(handle))
    with pytest.raises(AgentError) as caught:
        await client.history(1.0, 2.0)
    await client.aclose()
    assert "no journal" in caught.value.reason


def test_bus_error_chart_only_for_counters_that_counted() -> None:
    healthy = {"gpus[0].index": 0.0, "gpus[0].power_w": 250.0, "gpus[0].pcie_replay_total": 0.0,
               "gpus[0].nvlinks[0].link": 0.0, "gpus[0].nvlinks[0].crc_flit_total": 0.0,
               "gpus[0].nvlinks[0].replay_total": 0.0}
    assert "bus_errors" not in [c.key for c in charts_for(healthy)]
    loose = dict(healthy, **{"gpus[2].index": 2.0, "gpus[2].pcie_replay_total": 40.0,
                             "gpus[2].nvlinks[3].link": 3.0, "gpus[2].nvlinks[3].crc_flit_total": 17.0,
                             "gpus[2].nvlinks[3].replay_total": 0.0})
    chart = next(c for c in charts_for(loose) if c.key == "bus_errors")
    assert [(line.label, line.series) for line in chart.lines] == [
        ("GPU 2 PCIe replay", "gpus[2].pcie_replay_per_s"),
        ("GPU 2 NVLink 3 CRC", "gpus[2].nvlinks[3].crc_flit_per_s")]


@pytest.mark.parametrize(("low", "high", "most", "labels"), [
    # md array throughput: plotext's own labels read "1.5e3", "7.5e2".
    (0.0, 1508.0, 4, ["0", "500", "1000", "1500"]),
    # The rail: round volts to the step's decimals.
    (10.92, 12.68, 8, ["11.00", "11.25", "11.50", "11.75", "12.00", "12.25", "12.50"]),
    (10.92, 12.68, 4, ["11.0", "11.5", "12.0", "12.5"]),
    # A power chart below zero's pad: no "-0".
    (-18.0, 361.3, 4, ["0", "100", "200", "300"]),
    (1.7501, 1.7505, 4, ["1.7501", "1.7502", "1.7503", "1.7504", "1.7505"]),
    (5.0, 5.0, 4, []),
])
def test_value_ticks_are_round_and_never_in_exponent_form(low: float, high: float, most: int,
                                                          labels: list[str]) -> None:
    ticks = value_ticks(low, high, most)
    assert [label for _, label in ticks] == labels
    assert all(low - 1e-9 <= v <= high + 1e-9 and abs(float(label) - v) < 1e-9 for v, label in ticks)


def test_a_line_is_not_joined_across_the_time_the_node_sent_nothing() -> None:
    # A node that died at +4 (a PSU trip) and came back at +300: before, the rail's line ran
    # straight from its last reading to its first after the reboot, as if read all along.
    at = [1000.0, 1001.0, 1002.0, 1003.0, 1004.0, 1300.0, 1301.0, 1302.5]
    history = rail_history(at, [12.0, 11.9, 11.4, 11.3, 11.2, 12.0, 12.0, 11.9])
    chart = charts_for({"psu_rail.volts.min_volts": 12.0})[0]
    line = plot_data(chart, history, Window(1303.0, 900.0)).lines[0]
    assert line.breaks == (5,)
    assert [len(xs) for xs, _ in line.runs()] == [5, 3]
    assert line.runs()[0][1] == (12.0, 11.9, 11.4, 11.3, 11.2)
    # Buckets: a missing bucket or two is no gap, more is.
    buckets = replace(rail_history([0.0, 60.0, 180.0, 600.0], [12.0] * 4), tier="60s", step_s=60.0)
    assert plot_data(chart, buckets, Window(900.0, 3600.0)).lines[0].breaks == (3,)
