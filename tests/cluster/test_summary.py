"""NodeSummary from frames: host figures now, the other sources unknown until their readings exist."""

from __future__ import annotations

import random
from dataclasses import replace

from rigmon.cluster.summary import summarize
from rigmon.schema import CollectorStatus, Readings
from tests.tui.snapshot_apps.fake_agent import make_frame


def test_host_figures_and_unknown_sources() -> None:
    frame = make_frame("node01", "r1", 5, random.Random(1))
    summary = summarize(frame)
    assert summary.node == "node01" and summary.seq == 5
    assert summary.cpu_pct == frame.readings.host.cpu_pct  # type: ignore[union-attr]
    nic = frame.readings.net[0]
    assert summary.net_bytes_per_s == nic.rx_bytes_per_s + nic.tx_bytes_per_s  # type: ignore[operator]
    assert summary.rail_min_volts is None and summary.gpu_power_w is None
    assert summary.gpus_present is None and summary.links_total is None and summary.storage_bytes_per_s is None
    assert summary.collectors_failing == 0


def test_empty_readings_are_unknown_not_zero() -> None:
    frame = replace(make_frame("n", "r", 1, random.Random(1)), readings=Readings())
    summary = summarize(frame)
    assert summary.cpu_pct is None and summary.net_bytes_per_s is None


def test_failing_collectors_are_counted() -> None:
    frame = make_frame("n", "r", 1, random.Random(1))
    collectors = {"host": CollectorStatus("error", False, "boom"), "gpu": CollectorStatus("hung", False),
                  "psu": CollectorStatus("absent", True)}
    assert summarize(replace(frame, collectors=collectors)).collectors_failing == 2
