"""/metrics: names by Prometheus conventions, checked by the real promtool."""

from __future__ import annotations

import shutil
from pathlib import Path
import subprocess
from collections import Counter

import msgspec
import pytest
from prometheus_client import generate_latest

from rigmon.agent.metrics import FrameCollector, frame_metrics, make_registry, metric_name
from rigmon.schema import (
    Frame,
    PeerPathReading,
    ProbeResponderReading,
    PsuAdcCounters,
    PsuRailReading,
    VoltageEnvelope,
)
from tests.test_schema import sample_frame
from tests.tui.snapshot_apps.record_frames import load_frames


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
        ("peer_path", "rtt_p99_us", ("rigmon_peer_path_rtt_p99_seconds", 1e-6, False)),
    ],
)
def test_metric_names(prefix: str, field: str, expected: tuple[str, float, bool]) -> None:
    assert metric_name(prefix, field) == expected


def exposition(frame: Frame | None = None) -> str:
    frame = frame or sample_frame()
    collector = FrameCollector(lambda: frame)
    collector.observe(frame)
    return generate_latest(make_registry(collector)).decode()


def test_help_names_the_base_unit_of_a_scaled_series() -> None:
    # "NetInterfaceReading.speed_mbps" alone read as megabits on a series in bytes per second.
    text = exposition()
    assert "# HELP rigmon_host_cpu_ratio HostReading.cpu_pct, as a ratio (0-1)\n" in text
    assert "# HELP rigmon_network_speed_bytes_per_second NetInterfaceReading.speed_mbps, in bytes per second: " in text
    assert "# HELP rigmon_network_rx_bytes_total NetInterfaceReading.rx_bytes_total\n" in text


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


def test_an_md_members_superblock_number_is_no_series() -> None:
    # The member's number in its array (its alarm identity) is a name, not a measurement.
    frame = load_frames("raid1-member-failed-recovering")[20]
    array = frame.readings.raid[0]
    members = tuple(msgspec.structs.replace(m, device=k) for k, m in enumerate(array.members))
    frame = msgspec.structs.replace(frame, readings=msgspec.structs.replace(
        frame.readings, raid=(msgspec.structs.replace(array, members=members),)))
    families = {f.name for f in frame_metrics(frame, Counter())}
    assert "rigmon_md_member_slot" in families and "rigmon_md_member_device" not in families


def test_missing_readings_are_absent_not_zero() -> None:
    frame = sample_frame()
    assert frame.readings.host is not None
    host = msgspec.structs.replace(frame.readings.host, cpu_pct=None)
    frame = msgspec.structs.replace(frame, readings=msgspec.structs.replace(frame.readings, host=host))
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


def probe_frame() -> Frame:
    frame = sample_frame()
    paths = (
        PeerPathReading(name="node02/tbnet", peer="node02", path="tbnet", address="10.0.0.2", state="silent",
                        window_s=10.0, sent=100, received=0, loss_pct=100.0, interface="thunderbolt0", link_gbps=40.0,
                        sent_total=700, received_total=600, p99_limit_us=1000.0, loss_limit_pct=2.0),
        PeerPathReading(name="node02/roce", peer="node02", path="roce", address="10.0.1.2", state="ok",
                        window_s=10.0, sent=100, received=100, loss_pct=0.0, rtt_p50_us=12.5, rtt_p99_us=30.0,
                        rtt_max_us=41.0, jitter_us=2.0, last_reply_age_s=0.05, sent_total=700, received_total=700),
    )
    responder = ProbeResponderReading(address="0.0.0.0:9872", answered_total=1400, refused_mac_total=3)
    return msgspec.structs.replace(frame, readings=msgspec.structs.replace(frame.readings, peer_paths=paths,
                                                                   probe_responder=responder))


def test_peer_paths_are_exported_in_seconds_with_peer_and_path_labels() -> None:
    text = exposition(probe_frame())
    line = 'rigmon_peer_path_rtt_p99_seconds{interface="",node="node01",path="roce",peer="node02",transport="udp"} '
    assert float(text.split(line)[1].split()[0]) == pytest.approx(30e-6)
    assert ('rigmon_peer_path_state{interface="thunderbolt0",node="node01",path="tbnet",peer="node02",state="silent",'
            'transport="udp"} 1.0') in text
    assert 'rigmon_peer_path_loss_ratio{interface="thunderbolt0",node="node01",path="tbnet"' in text
    assert 'rigmon_peer_path_sent_total{interface="thunderbolt0",node="node01",path="tbnet"' in text
    assert 'rigmon_probe_responder_refused_mac_total{address="0.0.0.0:9872",node="node01"} 3.0' in text
    assert 'rigmon_peer_path_rtt_p50_seconds{interface="thunderbolt0"' not in text  # no reply: no sample, never 0


def test_promtool_finds_nothing_in_peer_paths() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package prometheus; .ci/run installs it)")
    out = subprocess.run([promtool, "check", "metrics"], input=exposition(probe_frame()), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "" and out.stderr.strip() == ""


def rail_frame(taken_at: float, min_volts: float) -> Frame:
    rail = PsuRailReading(
        port="/dev/ttyACM0", protocol="rm1", connected=True, stale=False, envelope_source="device", windows=1,
        volts=VoltageEnvelope(mean_volts=11.9, min_volts=min_volts, max_volts=12.0), amps=None,
        channels_volts={"v": VoltageEnvelope(mean_volts=11.9, min_volts=min_volts, max_volts=12.0)},
        channels_amps={}, samples=100, window_s=1.0, flags=0, under_voltage_latched=False,
        sag=min_volts < 11.5, seq=1, device_id="E661", firmware="1.0", sensor="ina226",
        last_window_at=taken_at, counters=PsuAdcCounters(),
    )
    frame = sample_frame()
    return msgspec.structs.replace(frame, taken_at=taken_at, readings=msgspec.structs.replace(frame.readings, psu_rail=rail))


def test_a_sag_between_two_scrapes_is_not_lost() -> None:
    frames = [rail_frame(1000.0, 11.93), rail_frame(1001.0, 11.384), rail_frame(1002.0, 11.95)]
    collector = FrameCollector(lambda: frames[-1])
    for frame in frames:
        collector.observe(frame)
    text = generate_latest(make_registry(collector)).decode()
    assert 'rigmon_psu_rail_min_volts{node="node01",port="/dev/ttyACM0"} 11.95' in text
    assert 'rigmon_psu_channel_min_volts{channel="v",node="node01",port="/dev/ttyACM0"} 11.95' in text
    assert 'rigmon_psu_rail_lowest_volts{node="node01"} 11.384' in text
    later = rail_frame(1062.0, 11.96)
    collector = FrameCollector(lambda: later)
    for frame in [*frames, later]:
        collector.observe(frame)
    assert 'rigmon_psu_rail_lowest_volts{node="node01"} 11.95' in generate_latest(make_registry(collector)).decode()


def test_a_silent_adc_is_exported_as_rail_stale() -> None:
    """RigmonRailAdcSilent (deploy/prometheus) alerts on this series; the node rule psu_adc_silent reads `stale`."""
    sending = rail_frame(1000.0, 11.93)
    silent_rail = msgspec.structs.replace(sending.readings.psu_rail, stale=True, windows=0, volts=None,
                                          channels_volts={})
    silent = msgspec.structs.replace(sending, readings=msgspec.structs.replace(sending.readings, psu_rail=silent_rail))
    labels = '{node="node01",port="/dev/ttyACM0"}'
    assert f"rigmon_psu_rail_stale{labels} 0.0" in exposition(sending)
    assert f"rigmon_psu_rail_stale{labels} 1.0" in exposition(silent)
    assert "# TYPE rigmon_psu_rail_stale gauge" in exposition(silent)


def test_one_xid_reported_by_nvml_and_the_kernel_log_is_counted_once() -> None:
    from rigmon.schema import Event

    def xid(source: str, at: float, code: int = 79) -> Event:
        return Event(id=f"{source}-{at}", at=at, kind="xid", severity="critical", subject="gpu:3",
                     message=f"Xid {code}", data={"source": source, "xid": code, "gpu_index": 3,
                                                  "pci_bus_id": "0000:1d:00.0"})

    base = sample_frame()
    frames = [msgspec.structs.replace(base, seq=base.seq + i, events=events) for i, events in enumerate(
        [(xid("nvml", 1000.2),), (xid("kmsg", 1000.0),), (xid("nvml", 1030.0), xid("kmsg", 1030.1, code=48))])]
    collector = FrameCollector(lambda: frames[-1])
    for frame in frames:
        collector.observe(frame)
    text = generate_latest(make_registry(collector)).decode()
    assert 'rigmon_events_total{code="79",kind="xid",node="node01",subject="gpu:3"} 2.0' in text
    assert 'rigmon_events_total{code="48",kind="xid",node="node01",subject="gpu:3"} 1.0' in text


def test_an_under_voltage_latch_between_two_scrapes_is_not_lost() -> None:
    """The comparator's flag is one window's: a scrape 5 s later saw 0, and RigmonRailUndervoltageLatched
    (deploy/prometheus) could not fire. The node rule psu_rail_undervoltage_latched reads the frame's flag."""
    plain = rail_frame(1000.0, 11.93)
    latched_rail = msgspec.structs.replace(plain.readings.psu_rail, under_voltage_latched=True)
    latched = msgspec.structs.replace(plain, taken_at=1001.0,
                                      readings=msgspec.structs.replace(plain.readings, psu_rail=latched_rail))
    frames = [plain, latched, rail_frame(1002.0, 11.95)]
    collector = FrameCollector(lambda: frames[-1])
    for frame in frames:
        collector.observe(frame)
    text = generate_latest(make_registry(collector)).decode()
    assert 'rigmon_psu_rail_under_voltage_latched{node="node01",port="/dev/ttyACM0"} 0.0' in text
    assert 'rigmon_psu_rail_under_voltage_latched_recently{node="node01"} 1.0' in text
    later = rail_frame(1062.0, 11.96)
    collector.observe(later)
    frames.append(later)
    assert 'rigmon_psu_rail_under_voltage_latched_recently{node="node01"} 0.0' in generate_latest(
        make_registry(collector)).decode()


def test_each_collectors_last_run_and_interval_are_exported() -> None:
    """RigmonCollectorSilent (deploy/prometheus) mirrors the node rule collector_silent with these:
    the time of the last result against the larger of 120 s and three of the collector's intervals."""
    frame = sample_frame()
    collector = FrameCollector(lambda: frame, intervals={"host": 1.0, "gpu": 60.0})
    collector.observe(frame)
    text = generate_latest(make_registry(collector)).decode()
    assert 'rigmon_collector_sampled_timestamp_seconds{collector="host",node="node01"} 1.7000000002e+09' in text
    assert 'rigmon_collector_sampled_timestamp_seconds{collector="gpu"' not in text  # never sampled: no series
    assert 'rigmon_collector_interval_seconds{collector="host",node="node01"} 1.0' in text
    assert 'rigmon_collector_interval_seconds{collector="gpu",node="node01"} 60.0' in text


def test_the_agent_exports_its_collectors_intervals(tmp_path: Path) -> None:
    from rigmon.agent.agent import Agent
    from rigmon.config import AgentConfig, AgentSection
    from tests.agent.test_api import Counter

    (tmp_path / "root").mkdir()
    config = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path / "root"), interval_s=0.5,
                                            state_dir=str(tmp_path / "state")))
    agent = Agent(config, collectors={"counter": Counter()})
    agent.app()
    assert agent.metrics is not None and agent.metrics.intervals == {"counter": 0.5}


def test_a_gpus_power_peak_between_two_scrapes_is_not_lost() -> None:
    # Incident 1 on a V100 rig the real collectors recorded (each DDP ramp peaks far above the power limit),
    # scraped every 5 s as deploy/prometheus/prometheus.yml does: the highest of each GPU's peaks reaches
    # Prometheus, not the one peak of every fifth frame that rigmon_gpu_power_peak_watts shows.
    frames = load_frames("v100-gpu-lost-rail-sag")
    current: list[Frame] = []
    collector = FrameCollector(lambda: current[-1])
    scraped: dict[str, float] = {}
    for i, frame in enumerate(frames):
        collector.observe(frame)
        current.append(frame)
        if i % 5 == 4:
            for family in make_registry(collector).collect():
                for s in family.samples:
                    if s.name == "rigmon_gpu_power_highest_watts":
                        scraped[s.labels["gpu"]] = max(scraped.get(s.labels["gpu"], 0.0), s.value)
    peaks: dict[str, float] = {}
    for frame in frames[: len(frames) // 5 * 5]:
        for gpu in frame.readings.gpus:
            for w in (gpu.power_peak_w, gpu.power_w):
                if w is not None:
                    peaks[str(gpu.index)] = max(peaks.get(str(gpu.index), 0.0), w)
    assert scraped == peaks
    # The plain peak series, every fifth frame, misses some of them: what this series is for.
    thinned = {str(g.index): 0.0 for g in frames[0].readings.gpus}
    for frame in frames[4::5]:
        for gpu in frame.readings.gpus:
            if gpu.power_peak_w is not None:
                thinned[str(gpu.index)] = max(thinned[str(gpu.index)], gpu.power_peak_w)
    assert thinned != peaks


def test_a_lost_gpus_highest_power_goes_with_it_from_the_frame() -> None:
    frame = load_frames("v100-gpu-lost-rail-sag")[0]
    collector = FrameCollector(lambda: frame)
    collector.observe(frame)
    text = generate_latest(make_registry(collector)).decode()
    assert len([line for line in text.splitlines() if line.startswith("rigmon_gpu_power_highest_watts{")]) == 4
    gone = msgspec.structs.replace(frame, taken_at=frame.taken_at + 1,
                                   readings=msgspec.structs.replace(frame.readings, gpus=frame.readings.gpus[:3]))
    collector = FrameCollector(lambda: gone)
    collector.observe(frame)
    collector.observe(gone)
    text = generate_latest(make_registry(collector)).decode()
    assert [line.split("{")[1].split(",")[0] for line in text.splitlines()
            if line.startswith("rigmon_gpu_power_highest_watts{")] == ['gpu="0"', 'gpu="1"', 'gpu="2"']
