"""NodeSummary from frames: host-only frames, and frames of real collectors on simulator trees (recorded fixtures)."""

from __future__ import annotations

import random

import pytest
from msgspec.structs import fields, replace

from rigmon.alarms.cluster import DEFAULT_PEER_CHECKS, node_figures
from rigmon.clock import SystemClock
from rigmon.cluster.chart import charts_for, frame_values
from rigmon.cluster.incident import problems
from rigmon.cluster.node_store import NodeStore, power_limit_w
from rigmon.schema import CollectorStatus, GpuReading, Readings, encode
from rigmon.summary import SLIM_DROPPED, SLIM_GPU_FIELDS, detail_values, slim_frame, summarize, summary_record
from tests.tui.snapshot_apps.fake_agent import make_frame
from tests.tui.snapshot_apps.record_frames import FIXTURES as FRAME_FIXTURES
from tests.tui.snapshot_apps.record_frames import load_frames


def test_host_figures_and_unknown_sources() -> None:
    frame = make_frame("node01", "r1", 5, random.Random(1))
    summary = summarize(frame)
    assert summary.node == "node01" and summary.seq == 5
    assert summary.cpu_pct == frame.readings.host.cpu_pct  # type: ignore[union-attr]
    nic = frame.readings.net[0]
    assert summary.net_bytes_per_s == nic.rx_bytes_per_s + nic.tx_bytes_per_s  # type: ignore[operator]
    assert summary.rail_min_volts is None and summary.gpu_power_w is None
    assert summary.gpus_present is None and summary.storage_bytes_per_s is None
    assert summary.arrays_degraded is None and summary.gpus_lost is None
    assert summary.collectors_failing == 0


def test_empty_readings_are_unknown_not_zero() -> None:
    frame = replace(make_frame("n", "r", 1, random.Random(1)), readings=Readings())
    summary = summarize(frame)
    assert summary.cpu_pct is None and summary.net_bytes_per_s is None
    assert (summary.links_healthy, summary.links_total) == (None, None)
    assert detail_values(frame.readings) == {}


def test_failing_collectors_are_counted() -> None:
    frame = make_frame("n", "r", 1, random.Random(1))
    collectors = {"host": CollectorStatus("error", False, "boom"), "gpu": CollectorStatus("hung", False),
                  "psu": CollectorStatus("absent", True)}
    assert summarize(replace(frame, collectors=collectors)).collectors_failing == 2


# (fixture, frame index, rail min V, GPU W, GPUs present/expected/lost, links healthy/total,
#  storage B/s (rounded to MB/s), arrays degraded/total)
CASES = [
    pytest.param("v100-gpu-lost-rail-sag", 5, 11.978, 193.929, (4, 4, 0), (1, 1), None, (None, None),
                 id="v100-idle-four-gpus"),
    pytest.param("v100-gpu-lost-rail-sag", 59, 11.53, 768.314, (3, 4, 1), (1, 1), None, (None, None),
                 id="v100-gpu3-lost-three-training"),
    pytest.param("enclosure-link-10g-array-lagging", 10, None, None, (None, None, None), (3, 3), 6370, (0, 2),
                 id="enclosures-both-links-20g"),
    pytest.param("enclosure-link-10g-array-lagging", 44, None, None, (None, None, None), (2, 3), 4923, (0, 2),
                 id="enclosure-0-1-at-10g"),
    pytest.param("raid1-member-failed-recovering", 24, None, None, (None, None, None), (1, 1), 1379, (1, 1),
                 id="raid1-degraded"),
    pytest.param("raid1-member-failed-recovering", 41, None, None, (None, None, None), (1, 1), 1293, (1, 1),
                 id="raid1-recovering-still-degraded"),
    pytest.param("two-raid0-model-load", 29, None, None, (None, None, None), (3, 3), 2289, (0, 2),
                 id="model-load-two-raid0"),
    pytest.param("strix-usb4-thunderbolt-net", 49, None, None, (None, None, None), (3, 4), 76, (0, 1),
                 id="strix-usb4-cable-at-10g"),
    pytest.param("strix-amd-gpu", 14, None, 120.681, (1, 1, 0), (2, 2), None, (None, None),
                 id="strix-amd-gpu"),
]


@pytest.mark.parametrize(("fixture", "index", "rail", "power", "gpus", "links", "storage_mb", "arrays"), CASES)
def test_figures_of_recorded_frames(fixture: str, index: int, rail: float | None, power: float | None,
                                    gpus: tuple[int | None, int | None, int | None],
                                    links: tuple[int | None, int | None], storage_mb: int | None,
                                    arrays: tuple[int | None, int | None]) -> None:
    frame = load_frames(fixture)[index]
    s = summarize(frame)
    assert s.rail_min_volts == rail
    assert s.gpu_power_w == (None if power is None else pytest.approx(power, abs=1e-3))
    assert (s.gpus_present, s.gpus_expected, s.gpus_lost) == gpus
    assert (s.links_healthy, s.links_total) == links
    assert (None if s.storage_bytes_per_s is None else round(s.storage_bytes_per_s / 1e6)) == storage_mb
    assert (s.arrays_degraded, s.arrays_total) == arrays


def test_rail_figure_is_the_window_minimum_never_the_mean() -> None:
    frame = load_frames("v100-gpu-lost-rail-sag")[20]
    rail = frame.readings.psu_rail
    assert rail is not None and rail.volts is not None and rail.volts.min_volts < rail.volts.mean_volts - 0.1
    assert summarize(frame).rail_min_volts == rail.volts.min_volts


def test_stale_rail_is_unknown() -> None:
    frame = load_frames("v100-gpu-lost-rail-sag")[20]
    stale = replace(frame.readings.psu_rail, stale=True, volts=None, amps=None)  # type: ignore[type-var]
    assert summarize(replace(frame, readings=replace(frame.readings, psu_rail=stale))).rail_min_volts is None


def test_detail_series_name_devices_by_identity() -> None:
    frames = load_frames("v100-gpu-lost-rail-sag")
    values = detail_values(frames[59].readings)
    gpu0, gpu3 = frames[59].readings.gpus[0], frames[59].readings.gpus[3]
    # The peak between polls, so the trend shows what the rail had to carry.
    assert values[f"gpu[{gpu0.uuid}].power_w"] == gpu0.power_peak_w
    assert values[f"gpu[{gpu3.uuid}].power_w"] is None
    assert values["rail.mean_volts"] == frames[59].readings.psu_rail.volts.mean_volts  # type: ignore[union-attr]
    assert values["path[vpsu-v].resistance_mohm"] == frames[59].readings.path_resistance[0].resistance_mohm
    storage = detail_values(load_frames("enclosure-link-10g-array-lagging")[44].readings)
    assert {"raid[md126].read_bytes_per_s", "raid[md127].write_bytes_per_s", "net[enp191s0].bytes_per_s"} <= set(storage)


@pytest.mark.parametrize("fixture", sorted(p.name.removesuffix(".jsonl.gz") for p in FRAME_FIXTURES.glob("*.jsonl.gz")))
def test_a_summary_records_frame_keeps_what_the_cluster_screen_reads(fixture: str) -> None:
    """The slim frame of `summary_record` gives the cluster row, the history view's charts and the
    cluster rules' peer checks what the whole frame gives (so a node followed by summaries shows the same)."""
    store = NodeStore("k", "http://n", SystemClock())
    for frame in load_frames(fixture):
        record = summary_record(frame)
        slim = record.frame
        assert record.summary == summarize(frame) and record.details == detail_values(frame.readings)
        assert len(encode(record)) < len(encode(frame)) + 2000
        assert (slim.node, slim.run_id, slim.seq, slim.taken_at, slim.collectors, slim.events) == (
            frame.node, frame.run_id, frame.seq, frame.taken_at, frame.collectors, frame.events)
        summary = store.worst.add(record.summary)
        assert problems(slim, summary, (), store.rail) == problems(frame, summary, (), store.rail)
        assert power_limit_w(slim) == power_limit_w(frame)
        # The host's temperatures are left out of a slim frame but those at their critical limit: a node followed by
        # summaries offers the temperature charts of those sensors alone (the others once its node screen shows it).
        full, kept = charts_for(frame_values(frame)), charts_for(frame_values(slim))
        assert [c for c in kept if not c.key.startswith("temp:")] == [c for c in full if not c.key.startswith("temp:")]
        critical = {f"temperatures[{t.sensor}].temp_c" for t in frame.readings.temperatures if t.over_crit}
        assert critical <= {name for chart in kept for name in chart.series}
        for check in DEFAULT_PEER_CHECKS:
            assert node_figures({"n": slim}, check.select, check.aggregate) == \
                node_figures({"n": frame}, check.select, check.aggregate)


def test_slim_frames_drop_only_the_listed_readings() -> None:
    frame = load_frames("v100-gpu-lost-rail-sag")[-1]
    slim = slim_frame(frame)
    for name in (f.name for f in fields(Readings)):
        if name in SLIM_DROPPED:
            assert getattr(slim.readings, name) == getattr(Readings(), name)
        elif name != "gpus":
            assert getattr(slim.readings, name) == getattr(frame.readings, name)
    assert frame.readings.gpus and len(slim.readings.gpus) == len(frame.readings.gpus)
    for gpu, whole in zip(slim.readings.gpus, frame.readings.gpus):
        for name in (f.name for f in fields(GpuReading)):
            if name in SLIM_GPU_FIELDS and name != "nvlinks":
                assert getattr(gpu, name) == getattr(whole, name)
            elif name != "nvlinks":
                assert getattr(gpu, name) in (None, ())
        assert all(link in whole.nvlinks for link in gpu.nvlinks)
