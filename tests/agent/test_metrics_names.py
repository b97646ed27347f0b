"""/metrics names that say what a series is: link capacity is not traffic, rates are in base units.

Renamed series keep their old name for one release as a duplicate whose HELP says it is
deprecated and what replaces it; the shipped rules and dashboard use the new names only.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import msgspec
import pytest
from prometheus_client import generate_latest

from rigmon.agent.metrics import DEPRECATED, FrameCollector, make_registry
from rigmon.schema import DiskReading, Frame, PathResistanceReading, PeerPathReading, ThunderboltDeviceReading
from tests.test_schema import sample_frame
from tests.tui.snapshot_apps.record_frames import load_frames

REPO = Path(__file__).resolve().parents[2]


def names_frame() -> Frame:
    frame = sample_frame()
    link = ThunderboltDeviceReading(
        name="0-1", kind="device", domain=0, vendor="OWC", device_name="Express 4M2", generation=3, authorized=True,
        unique_id="u1", nvm_version="55.0", rx_speed_gbps=20.0, tx_speed_gbps=20.0, rx_lanes=2, tx_lanes=2,
        rx_gbps=40.0, tx_gbps=40.0, expected_gbps=40.0, expected_source="generation", link_state="ok",
        degraded_reason=None)
    path = PathResistanceReading(path="psu-terminals", method="two_point", resistance_mohm=1.75, uncertainty_mohm=0.02,
                                 points=900, current_span_amps=None, trend_mohm_per_day=0.0864, trend_days=3.0,
                                 baseline_mohm=1.6)
    disk = DiskReading(name="nvme0n1", major=259, minor=0, reads_total=5000, writes_total=200, read_bytes_total=1 << 30,
                       write_bytes_total=1 << 20, in_flight=3, discards_total=0, flushes_total=0,
                       read_bytes_per_s=1.07e9, write_bytes_per_s=0.0, read_iops=8200.0, write_iops=0.0,
                       util_pct=97.0, read_await_ms=0.4, write_await_ms=None)
    peer = PeerPathReading(name="node02/tbnet", peer="node02", path="tbnet", address="10.0.0.2", interface="thunderbolt0",
                           link_gbps=40.0)
    readings = msgspec.structs.replace(frame.readings, thunderbolt=(link,), path_resistance=(path,), disks=(disk,),
                                       peer_paths=(peer,))
    return msgspec.structs.replace(frame, readings=readings)


def exposition() -> str:
    frame = names_frame()
    collector = FrameCollector(lambda: frame)
    collector.observe(frame)
    return generate_latest(make_registry(collector)).decode()


def sample(text: str, name: str) -> float:
    [value] = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{")]
    return value


def help_of(text: str, name: str) -> str:
    [line] = [line for line in text.splitlines() if line.startswith(f"# HELP {name} ")]
    return line.removeprefix(f"# HELP {name} ")


def test_thunderbolt_link_capacity_is_named_so() -> None:
    # 2 lanes x 20 Gb/s: 5 GB/s per direction the link can carry, whatever it carries.
    text = exposition()
    assert sample(text, "rigmon_thunderbolt_rx_capacity_bytes_per_second") == 5e9
    assert sample(text, "rigmon_thunderbolt_tx_capacity_bytes_per_second") == 5e9
    assert sample(text, "rigmon_thunderbolt_expected_capacity_bytes_per_second") == 5e9
    assert "not traffic" in help_of(text, "rigmon_thunderbolt_rx_capacity_bytes_per_second")


@pytest.mark.parametrize(("name", "says"), [
    ("rigmon_thunderbolt_rx_speed_bytes_per_second", "one receive lane"),
    ("rigmon_thunderbolt_tx_speed_bytes_per_second", "one send lane"),
    ("rigmon_infiniband_rate_bytes_per_second", "the rate the port trained at"),
    ("rigmon_infiniband_expected_bytes_per_second", "the rate the port should train at"),
    ("rigmon_peer_path_link_bytes_per_second", "the speed of the local interface"),
    ("rigmon_network_speed_bytes_per_second", "the speed the interface negotiated"),
    ("rigmon_thunderbolt_rx_bytes_per_second", "DEPRECATED"),
])
def test_help_of_a_link_capacity_says_it_is_not_traffic(name: str, says: str) -> None:
    # These keep their names (dashboards use them); their HELP is where an operator learns what they are.
    help_text = help_of(exposition(), name)
    assert says in help_text and "not traffic" in help_text, help_text


def test_path_resistance_trend_is_in_ohms_per_second() -> None:
    text = exposition()
    assert sample(text, "rigmon_psu_path_trend_ohms_per_second") == pytest.approx(0.0864e-3 / 86400)
    # Beside it, rigmon_psu_path_trend_seconds read as the trend itself in seconds: it is the span of days fitted.
    assert sample(text, "rigmon_psu_path_trend_span_seconds") == 3 * 86400.0
    assert "span" in help_of(text, "rigmon_psu_path_trend_span_seconds")
    assert "rigmon_psu_path_trend_seconds{" in text


def test_disk_operations_per_second_come_from_the_counters() -> None:
    # rate(rigmon_disk_reads_total[1m]) is the read IOPS, as rate() of every other exported counter.
    text = exposition()
    assert sample(text, "rigmon_disk_reads_total") == 5000
    old = {name for name, _, _ in DEPRECATED.values()}
    assert not [n for n in re.findall(r"^(rigmon_disk_\w*iops\w*)\{", text, re.M) if n not in old]


@pytest.mark.parametrize(("old", "new", "value"), [
    ("rigmon_thunderbolt_rx_bytes_per_second", "rigmon_thunderbolt_rx_capacity_bytes_per_second", 5e9),
    ("rigmon_thunderbolt_tx_bytes_per_second", "rigmon_thunderbolt_tx_capacity_bytes_per_second", 5e9),
    ("rigmon_thunderbolt_expected_bytes_per_second", "rigmon_thunderbolt_expected_capacity_bytes_per_second", 5e9),
    ("rigmon_psu_path_trend_ohms_per_day", "rigmon_psu_path_trend_ohms_per_second", 0.0864e-3),
    ("rigmon_disk_read_iops", "rate(rigmon_disk_reads_total[1m])", 8200.0),
    ("rigmon_disk_write_iops", "rate(rigmon_disk_writes_total[1m])", 0.0),
    ("rigmon_network_mtu", "rigmon_network_mtu_bytes", 9000.0),
    ("rigmon_psu_path_trend_seconds", "rigmon_psu_path_trend_span_seconds", 3 * 86400.0),
    ("rigmon_thunderbolt_domain", "the domain label of rigmon_thunderbolt_info", 0.0),
])
def test_old_names_stay_for_one_release_as_deprecated_duplicates(old: str, new: str, value: float) -> None:
    text = exposition()
    assert sample(text, old) == pytest.approx(value)
    assert help_of(text, old).startswith(f"DEPRECATED (removed in the next release): use {new}")


def test_promtool_finds_nothing_in_the_renamed_series() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package prometheus; .ci/run installs it)")
    out = subprocess.run([promtool, "check", "metrics"], input=exposition(), capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(), out.stdout + out.stderr


def test_shipped_rules_and_dashboard_use_no_deprecated_name() -> None:
    shipped = (REPO / "deploy" / "prometheus" / "rigmon-rules.yml").read_text()
    shipped += json.dumps(json.loads((REPO / "deploy" / "grafana" / "rigmon.json").read_text()))
    used = set(re.findall(r"\brigmon_[a-z0-9_]+", shipped))
    assert not used & {name for name, _, _ in DEPRECATED.values()}


def test_no_gauge_and_counter_are_one_family_in_openmetrics() -> None:
    # OpenMetrics names a counter's family without `_total`: the gauge rigmon_psu_rail_windows and the
    # counter rigmon_psu_rail_windows_total were two HELP lines for one family, which promtool refuses;
    # the deprecated gauge is served in the text format only.
    from collections import Counter

    from rigmon.agent.metrics import frame_metrics
    from rigmon.agent.metrics_exposition import openmetrics_families
    from tests.agent.test_metrics import rail_frame

    frame = rail_frame(1000.0, 11.9)
    frame = msgspec.structs.replace(frame, readings=msgspec.structs.replace(
        frame.readings, **{f: getattr(names_frame().readings, f)
                           for f in ("thunderbolt", "path_resistance", "disks", "peer_paths")}))
    metrics = frame_metrics(frame, Counter())
    families = Counter(m.name for m in openmetrics_families(metrics))
    assert "rigmon_psu_rail_windows" in families  # the counter's family
    assert Counter(m.name for m in metrics if not m.documentation.startswith("DEPRECATED")) <= families
    assert [name for name, count in families.items() if count > 1] == []


def test_the_rails_windows_of_a_frame_keep_their_old_name_for_one_release() -> None:
    from tests.agent.test_metrics import rail_frame

    frame = rail_frame(1000.0, 11.9)
    collector = FrameCollector(lambda: frame)
    text = generate_latest(make_registry(collector)).decode()
    assert sample(text, "rigmon_psu_rail_frame_windows") == 1
    assert "all of them: rigmon_psu_rail_windows_total" in help_of(text, "rigmon_psu_rail_frame_windows")
    assert sample(text, "rigmon_psu_rail_windows") == 1
    assert help_of(text, "rigmon_psu_rail_windows").startswith(
        "DEPRECATED (removed in the next release): use rigmon_psu_rail_frame_windows")


def test_help_of_an_nvme_link_speed_says_transfers_per_second() -> None:
    # The schema's GT/s per lane are exported in transfers per second; the HELP found the shorter unit
    # `_per_second` first and read "NvmeReading.link_speed_gts, in per second".
    from rigmon.schema import NvmeReading

    nvme = NvmeReading(name="nvme0", model="WD_BLACK SN850X", serial="S1", firmware="620311WD", state="live",
                       transport="pcie", address="0000:03:00.0", namespaces=("nvme0n1",), link_speed_gts=8.0,
                       link_width=4, max_link_speed_gts=16.0, max_link_width=4, link_gen=3, max_link_gen=4,
                       link_lost=False, temp_c=41.0, temp_max_c=84.0, temp_crit_c=88.0, port_max_link_speed_gts=16.0,
                       link_state="degraded")
    frame = sample_frame()
    frame = msgspec.structs.replace(frame, readings=msgspec.structs.replace(frame.readings, nvme=(nvme,)))
    text = generate_latest(make_registry(FrameCollector(lambda: frame))).decode()
    for field, name, value in [("link_speed_gts", "link_speed", 8e9), ("max_link_speed_gts", "max_link_speed", 16e9),
                               ("port_max_link_speed_gts", "port_max_link_speed", 16e9)]:
        metric = f"rigmon_nvme_{name}_transfers_per_second"
        assert help_of(text, metric) == f"NvmeReading.{field}, in transfers per second"
        assert sample(text, metric) == value


def test_the_guards_times_are_named_as_timestamps() -> None:
    # `released_until` and `unread_since` are Unix seconds: exported as rigmon_guard_released_until, a
    # name without its unit, they read as a count.
    from rigmon.schema import GuardReading

    guard = GuardReading(mode="enforce", acting=True, state="released", step=0, step_name=None,
                         released_until=1_795_000_600.0, unread=("rail",), unread_since=1_795_000_000.0)
    frame = sample_frame()
    frame = msgspec.structs.replace(frame, readings=msgspec.structs.replace(frame.readings, guard=guard))
    text = generate_latest(make_registry(FrameCollector(lambda: frame))).decode()
    assert sample(text, "rigmon_guard_released_until_timestamp_seconds") == 1_795_000_600.0
    assert sample(text, "rigmon_guard_unread_since_timestamp_seconds") == 1_795_000_000.0
    assert help_of(text, "rigmon_guard_unread_since_timestamp_seconds").startswith("GuardReading.unread_since: ")
    assert "rigmon_guard_released_until{" not in text and "rigmon_guard_unread_since{" not in text


def test_a_routers_vendor_and_model_are_an_info_series_beside_its_identity() -> None:
    # RigmonThunderboltLinkDegraded names the enclosure by it: "link 0-1 (OWC Express 4M2)".
    text = exposition()
    [line] = [line for line in text.splitlines() if line.startswith("rigmon_thunderbolt_info{")]
    assert line == ('rigmon_thunderbolt_info{device="0-1",domain="0",kind="device",model="Express 4M2",node="node01",'
                    'nvm_version="55.0",vendor="OWC"} 1.0')
    # Its HELP says which schema field each label holds (the model is the router's device_name).
    assert "device_name as model" in help_of(text, "rigmon_thunderbolt_info")
    # Only the info series carries them: a firmware update does not start every series of the link anew.
    assert [n for n in re.findall(r"^(rigmon_\w+)\{.*vendor=", text, re.MULTILINE) if "process" not in n] == [
        "rigmon_thunderbolt_info"]


@pytest.mark.parametrize("recording", ["v100-gpu-lost-rail-sag", "two-raid0-model-load"])
def test_a_gpus_model_and_an_nvmes_model_and_firmware_are_info_series(recording: str) -> None:
    # Frames the real collectors made from a simulated V100 rig and a node with NVMe in USB4 enclosures.
    frame = load_frames(recording)[-1]
    collector = FrameCollector(lambda: frame)
    lines = generate_latest(make_registry(collector)).decode().splitlines()
    assert frame.readings.gpus or frame.readings.nvme
    for gpu in frame.readings.gpus:
        assert gpu.name
        assert f'rigmon_gpu_info{{gpu="{gpu.index}",model="{gpu.name}",node="{frame.node}",uuid="{gpu.uuid}"}} 1.0' \
            in lines
    for nvme in frame.readings.nvme:
        assert nvme.model and nvme.firmware
        [line] = [line for line in lines if line.startswith("rigmon_nvme_info{") and f'controller="{nvme.name}"' in line]
        assert f'model="{nvme.model}"' in line and f'firmware="{nvme.firmware}"' in line


#: The rail's series of the agent's last minute, not of one reading: the node is their identity.
NODE_WIDE = {"rigmon_psu_rail_lowest_volts", "rigmon_psu_rail_under_voltage_latched_recently"}


def test_the_rails_series_keep_one_identity_from_the_agents_first_frame() -> None:
    # The ADC names itself in its first window, a second or two after the agent opened the port: with its id
    # a label, every agent start exported each rail series twice (device_id "" and then its id), and a
    # rate() over the ADC's counters began anew. Its id, firmware and sensor are the rail's info series.
    frames = load_frames("adc-unplugged")
    assert frames[0].readings.psu_rail is not None and frames[0].readings.psu_rail.device_id is None
    identities, infos = set(), set()
    for frame in frames:
        collector = FrameCollector(lambda frame=frame: frame)  # type: ignore[misc]
        for family in make_registry(collector).collect():
            for s in family.samples:
                if s.name == "rigmon_psu_rail_info":
                    infos.add(s.labels["device_id"])
                elif s.name.startswith("rigmon_psu_rail_") and s.name not in NODE_WIDE and \
                        "protocol" not in s.labels and "envelope_source" not in s.labels:
                    identities.add(tuple(sorted(s.labels.items())))
    assert identities == {(("node", frames[0].node), ("port", frames[0].readings.psu_rail.port))}
    assert infos == {"", "AU00000000000000"}


def test_an_amd_gpus_series_keep_their_identity_when_its_card_number_changes_at_a_reboot() -> None:
    # The DRM card number follows the order drivers probe in: after a reboot card0 may be card1, and a
    # series keyed by it continued as another GPU's. The PCI address is the GPU's of every boot; the card
    # of this boot is on its info series.
    frame = load_frames("strix-amd-gpu")[-1]
    (amd,) = frame.readings.amd_gpus
    assert amd.card == "card0" and amd.pci_bus_id

    def series(frame: Frame) -> tuple[set[tuple[str, tuple[tuple[str, str], ...]]], list[dict[str, str]]]:
        identities, infos = set(), []
        for family in make_registry(FrameCollector(lambda: frame)).collect():
            for s in family.samples:
                if s.name == "rigmon_amd_gpu_info":
                    infos.append(s.labels)
                elif s.name.startswith("rigmon_amd_gpu_"):
                    identities.add((s.name, tuple(sorted(s.labels.items()))))
        return identities, infos

    rebooted = msgspec.structs.replace(frame, readings=msgspec.structs.replace(
        frame.readings, amd_gpus=(msgspec.structs.replace(amd, card="card1"),)))
    before, info_before = series(frame)
    after, info_after = series(rebooted)
    assert before and before == after
    assert all(dict(labels) == {"node": frame.node, "pci_bus_id": amd.pci_bus_id} for _, labels in before)
    assert info_before == [{"node": frame.node, "pci_bus_id": amd.pci_bus_id, "card": "card0"}]
    assert info_after == [{"node": frame.node, "pci_bus_id": amd.pci_bus_id, "card": "card1"}]


def test_ids_are_labels_of_the_info_series_not_gauges() -> None:
    """A Thunderbolt router's domain and an md member's slot and superblock number name things: a gauge of
    them summed or averaged means nothing. They are labels of the item's info series; the old gauges stay
    one release, deprecated."""
    text = exposition()
    assert 'domain="0"' in next(line for line in text.splitlines() if line.startswith("rigmon_thunderbolt_info{"))
    frame = load_frames("raid1-member-failed-recovering")[20]
    array = frame.readings.raid[0]
    members = tuple(msgspec.structs.replace(m, device=k) for k, m in enumerate(array.members))
    frame = msgspec.structs.replace(frame, readings=msgspec.structs.replace(
        frame.readings, raid=(msgspec.structs.replace(array, members=members),)))
    collector = FrameCollector(lambda: frame)
    text = generate_latest(make_registry(collector)).decode()
    info = {(m["member"], m["slot"], m["number"]) for m in
            (dict(re.findall(r'(\w+)="([^"]*)"', line)) for line in text.splitlines()
             if line.startswith("rigmon_md_member_info{"))}
    assert info == {(m.name, "" if m.slot is None else str(m.slot), str(k)) for k, m in enumerate(members)}
    assert help_of(text, "rigmon_md_member_slot").startswith(
        "DEPRECATED (removed in the next release): use the slot label of rigmon_md_member_info")
