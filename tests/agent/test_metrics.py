"""/metrics: names by Prometheus conventions, checked by the real promtool."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from collections import Counter

import pytest
from prometheus_client import generate_latest

from rigmon.agent.metrics import FrameCollector, frame_metrics, make_registry, metric_name
from tests.test_schema import sample_frame


@pytest.mark.parametrize(
    ("prefix", "field", "expected"),
    [
        ("gpu", "power_w", ("rigmon_gpu_power_watts", 1.0, False)),
        ("gpu", "clock_sm_mhz", ("rigmon_gpu_clock_sm_hertz", 1e6, False)),
        ("gpu", "util_pct", ("rigmon_gpu_util_ratio", 0.01, False)),
        ("gpu", "energy_mj_total", ("rigmon_gpu_energy_joules_total", 1e-3, True)),
        ("gpu", "energy_j_total", ("rigmon_gpu_energy_joules_total", 1.0, True)),
        ("gpu", "violation_power_s_total", ("rigmon_gpu_violation_power_seconds_total", 1.0, True)),
        ("disk", "read_await_ms", ("rigmon_disk_read_await_seconds", 1e-3, False)),
        ("psu", "path_resistance_mohm", ("rigmon_psu_path_resistance_ohms", 1e-3, False)),
        ("network", "rx_bytes_total", ("rigmon_network_rx_bytes_total", 1.0, True)),
        ("network", "speed_mbps", ("rigmon_network_speed_bytes_per_second", 125000.0, False)),
        ("host", "cpu_count", ("rigmon_host_cpus", 1.0, False)),
        ("host", "uptime_s", ("rigmon_host_uptime_seconds", 1.0, False)),
        ("psu", "min_volts", ("rigmon_psu_min_volts", 1.0, False)),
    ],
)
def test_metric_names(prefix: str, field: str, expected: tuple[str, float, bool]) -> None:
    assert metric_name(prefix, field) == expected


def exposition() -> str:
    frame = sample_frame()
    collector = FrameCollector(lambda: frame)
    collector.observe(frame)
    return generate_latest(make_registry(collector)).decode()


def test_exposition_has_values_in_base_units() -> None:
    text = exposition()
    assert 'rigmon_host_cpu_ratio{node="node01"} 0.125' in text
    assert 'rigmon_network_speed_bytes_per_second{interface="eth0",node="node01"} 1.25e+09' in text
    assert 'rigmon_network_rx_bytes_total{interface="eth0",node="node01"} 1000.0' in text
    assert "rx_bytes_per_second" not in text  # the counter is exported instead
    assert 'rigmon_collector_up{collector="gpu",node="node01"} 1.0' in text
    assert 'rigmon_collector_state{collector="gpu",node="node01",state="absent"} 1.0' in text
    assert 'rigmon_events_total{code="",kind="agent_started",node="node01",subject="node:node01"} 1.0' in text
    assert "boot_id" not in text


def test_missing_readings_are_absent_not_zero() -> None:
    frame = sample_frame()
    assert frame.readings.host is not None
    host = dataclasses.replace(frame.readings.host, cpu_pct=None)
    frame = dataclasses.replace(frame, readings=dataclasses.replace(frame.readings, host=host))
    families = {f.name for f in frame_metrics(frame, Counter())}
    assert "rigmon_host_cpu_ratio" not in families  # null on the wire -> no sample, never 0
    assert "rigmon_host_load_1" in families


def test_promtool_finds_nothing() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package prometheus; .ci/run installs it)")
    out = subprocess.run([promtool, "check", "metrics"], input=exposition(), capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "" and out.stderr.strip() == ""
