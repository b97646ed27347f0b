"""hwmon power collector: Super I/O voltages with board scale factors, PMBus PSUs and current sharing."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rigmon.collectors.base import EventDraft, NoData
from rigmon.collectors.hwmon_power import (IMBALANCE_READS, HwmonPowerCollector, current_shares, parse_channel_names, parse_i2c_client,
                                           psu_sensors)
from rigmon.config import PsuHwmonSection
from rigmon.hw.root import HostRoot
from rigmon.schema import HwmonVoltageReading, PmbusPsuReading
from rigmon.sim import write_tree
from rigmon.sim.node import SimNode
from rigmon.sim.psu import SimPsuRail
from rigmon.sim.tree import Tree
from tests.collectors.root_helpers import ReadLog

NCT6779 = {
    "/sys/class/hwmon/hwmon1/name": "nct6779\n",
    "/sys/class/hwmon/hwmon1/in0_input": "1016\n",
    "/sys/class/hwmon/hwmon1/in4_input": "1832\n",  # 12 V behind a 56k/10k divider
    "/sys/class/hwmon/hwmon1/in4_min": "1712\n",
    "/sys/class/hwmon/hwmon1/in4_alarm": "0\n",
    "/sys/class/hwmon/hwmon1/temp1_input": "41000\n",
    "/sys/class/hwmon/hwmon0/name": "k10temp\n",
    "/sys/class/hwmon/hwmon0/temp1_input": "45000\n",
}


def psu_files(index: int, iout_ma: int, alarm: str = "0") -> dict[str, str]:
    base = f"/sys/class/hwmon/hwmon{index}"
    return {
        f"{base}/name": "pmbus\n", f"{base}/in1_label": "vin\n", f"{base}/in1_input": "231500\n",
        f"{base}/in2_label": "vout1\n", f"{base}/in2_input": "12031\n",
        f"{base}/curr1_label": "iin\n", f"{base}/curr1_input": "3100\n",
        f"{base}/curr2_label": "iout1\n", f"{base}/curr2_input": f"{iout_ma}\n",
        f"{base}/power1_label": "pin\n", f"{base}/power1_input": "690000000\n",
        f"{base}/power2_label": "pout1\n", f"{base}/power2_input": "640000000\n",
        f"{base}/temp1_input": "38500\n", f"{base}/fan1_input": "9120\n",
        f"{base}/in2_lcrit_alarm": f"{alarm}\n",
    }


def test_super_io_voltage_is_scaled_by_the_board_divider(tmp_path: Path) -> None:
    tree = write_tree(tmp_path, NCT6779)
    # Registered by the nct6775 driver below the chip's platform device (hardware monitor at I/O port 0x290).
    tree.symlink("/sys/class/hwmon/hwmon1/device", "../../../devices/platform/nct6775.656")
    tree.symlink("/sys/devices/platform/nct6775.656/subsystem", "../../../bus/platform")
    collector = HwmonPowerCollector(HostRoot(tmp_path), PsuHwmonSection(scale={"nct6779/in4": 6.6}))
    readings = [r for r in collector.collect() if isinstance(r, HwmonVoltageReading)]
    # Named as lm-sensors names the chip, not by the kernel's hwmonN (see test_hwmon_voltage_names).
    assert [r.sensor for r in readings] == ["nct6779-isa-0290/in0", "nct6779-isa-0290/in4"]
    twelve = readings[1]
    assert twelve.volts == pytest.approx(12.0912) and twelve.min_volts == pytest.approx(11.2992)
    assert twelve.alarm is False and twelve.scale == 6.6 and readings[0].volts == 1.016


def test_pmbus_psus_and_current_imbalance(tmp_path: Path) -> None:
    write_tree(tmp_path, {**psu_files(3, 52000), **psu_files(4, 50000), **psu_files(5, 18000, alarm="1")})
    collector = HwmonPowerCollector(HostRoot(tmp_path), PsuHwmonSection(share_imbalance_pct=15))
    records = collector.collect()
    psus = [r for r in records if isinstance(r, PmbusPsuReading)]
    assert [p.sensor for p in psus] == ["hwmon3", "hwmon4", "hwmon5"]
    first = psus[0]
    assert (first.vin_volts, first.vout_volts, first.iin_amps, first.iout_amps) == (231.5, 12.031, 3.1, 52.0)
    assert (first.pin_w, first.pout_w, first.temp_c, first.fan_rpm) == (690.0, 640.0, 38.5, 9120.0)
    assert psus[2].alarms == ("in2_lcrit",)
    assert [p.imbalanced for p in psus] == [False, False, True]
    assert psus[2].share_pct == 15.0 and psus[2].share_deviation_pct == pytest.approx(-18.33, abs=0.01)
    assert not [r for r in records if isinstance(r, EventDraft)], "one reading reports no imbalance"
    for _ in range(IMBALANCE_READS - 2):
        assert not [r for r in collector.collect() if isinstance(r, EventDraft)]
    events = [r for r in collector.collect() if isinstance(r, EventDraft)]
    assert [(e.kind, e.subject) for e in events] == [("psu_current_imbalance", "psu:hwmon5")]
    assert not [r for r in collector.collect() if isinstance(r, EventDraft)], "an imbalance is reported once"


def test_one_reading_across_a_load_step_reports_no_imbalance_nor_its_end(tmp_path: Path) -> None:
    # Each supply's telemetry is sampled at its own moment: a tick across a load step read one PSU at
    # the new load and the others at the old, and the lab demo's healthy node reported "PSU 1-0058
    # carries 54% of the current: check its connections", then "evenly again", every few seconds.
    tree = Tree(tmp_path)
    even = {3: 50000, 4: 50000, 5: 50000}
    torn = {3: 95000, 4: 50000, 5: 50000}
    collector = HwmonPowerCollector(HostRoot(tmp_path), PsuHwmonSection(share_imbalance_pct=15))
    events: list[str] = []
    for currents in (even, torn, even, even, torn, even, torn, torn, even):
        for hwmon, iout_ma in currents.items():
            for rel, content in psu_files(hwmon, iout_ma).items():
                tree.write(rel, content)
        events += [e.kind for e in collector.collect() if isinstance(e, EventDraft)]
    assert events == []


def test_an_idle_supply_set_is_not_called_balanced_again(tmp_path: Path) -> None:
    # Below MIN_SHARE_AMPS in total the shares say nothing: an imbalance stays reported until
    # readings under load show it gone.
    tree = Tree(tmp_path)
    collector = HwmonPowerCollector(HostRoot(tmp_path), PsuHwmonSection(share_imbalance_pct=15))
    kinds: list[str] = []
    for currents in [(52000, 50000, 18000)] * IMBALANCE_READS + [(1000, 1000, 500)] * 5:
        for hwmon, iout_ma in zip((3, 4, 5), currents, strict=True):
            for rel, content in psu_files(hwmon, iout_ma).items():
                tree.write(rel, content)
        kinds += [e.kind for e in collector.collect() if isinstance(e, EventDraft)]
    assert kinds == ["psu_current_imbalance"]


def psu_on_i2c(tree: Tree, hwmon: int, client: str, iout_ma: int) -> None:
    """A PMBus PSU as the kernel registers it: hwmonN/device -> its I2C client."""
    for rel, content in psu_files(hwmon, iout_ma).items():
        tree.write(rel, content)
    tree.write(f"/sys/devices/pci0000:00/0000:00:1f.4/i2c-7/{client}/name", "pmbus\n")
    tree.symlink(f"/sys/class/hwmon/hwmon{hwmon}/device", f"../../../devices/pci0000:00/0000:00:1f.4/i2c-7/{client}")


def collect_held(collector: HwmonPowerCollector) -> list[object]:
    """The records of `IMBALANCE_READS` collections of an unchanging tree: the last one's readings, every event."""
    events: list[object] = []
    for _ in range(IMBALANCE_READS):
        records = list(collector.collect())
        events += [r for r in records if isinstance(r, EventDraft)]
    return [*(r for r in records if not isinstance(r, EventDraft)), *events]


def test_pmbus_psus_are_named_by_their_i2c_client_across_a_reboot(tmp_path: Path) -> None:
    # The kernel numbers hwmon devices in probe order: after a reboot the same PSU (7-005a,
    # the imbalanced one) is hwmon3 where it was hwmon5. Its sensor, its event's subject and
    # so its journal series and alarm keep its I2C client's name.
    config = PsuHwmonSection(share_imbalance_pct=15)
    tree = Tree(tmp_path / "boot1")
    for hwmon, client, iout_ma in ((3, "7-0058", 52000), (4, "7-0059", 50000), (5, "7-005a", 18000)):
        psu_on_i2c(tree, hwmon, client, iout_ma)
    records = collect_held(HwmonPowerCollector(HostRoot(tmp_path / "boot1"), config))
    before = {r.sensor: r.iout_amps for r in records if isinstance(r, PmbusPsuReading)}
    events = [(e.subject, e.message) for e in records if isinstance(e, EventDraft)]
    assert [subject for subject, _ in events] == ["psu:7-005a"]
    tree = Tree(tmp_path / "boot2")
    for hwmon, client, iout_ma in ((3, "7-005a", 18000), (4, "7-0058", 52000), (6, "7-0059", 50000)):
        psu_on_i2c(tree, hwmon, client, iout_ma)
    records = collect_held(HwmonPowerCollector(HostRoot(tmp_path / "boot2"), config))
    after = {r.sensor: r.iout_amps for r in records if isinstance(r, PmbusPsuReading)}
    assert before == after == {"7-0058": 52.0, "7-0059": 50.0, "7-005a": 18.0}
    assert events == [(e.subject, e.message) for e in records if isinstance(e, EventDraft)]
    assert events[0][0] == "psu:7-005a" and events[0][1].startswith("PSU 7-005a carries 15.0% ")


def test_a_psu_without_an_i2c_client_keeps_its_hwmon_name(tmp_path: Path) -> None:
    tree = Tree(tmp_path)
    psu_on_i2c(tree, 3, "7-0058", 50000)
    for rel, content in psu_files(4, 50000).items():  # no device link (an old kernel)
        tree.write(rel, content)
    for rel, content in psu_files(5, 50000).items():  # a device that is not an I2C client
        tree.write(rel, content)
    tree.symlink("/sys/class/hwmon/hwmon5/device", "../../../devices/platform/dps920ab.0")
    psus = [r for r in HwmonPowerCollector(HostRoot(tmp_path), PsuHwmonSection()).collect()
            if isinstance(r, PmbusPsuReading)]
    assert [p.sensor for p in psus] == ["7-0058", "hwmon4", "hwmon5"]


def test_psu_sensor_names() -> None:
    assert parse_i2c_client("../../../7-0058") == "7-0058"
    assert parse_i2c_client("../../../devices/pci0000:00/0000:00:1f.4/i2c-12/12-005a/") == "12-005a"
    assert parse_i2c_client("../../../devices/platform/nct6775.656") is None
    assert parse_i2c_client("../../../i2c-7") is None
    assert parse_i2c_client(None) is None
    # Two hwmon devices of one client cannot both take its name.
    assert psu_sensors([("hwmon3", "7-0058"), ("hwmon4", "7-0058"), ("hwmon5", "7-0059"), ("hwmon6", None)]) == [
        "hwmon3", "hwmon4", "7-0059", "hwmon6"]


def test_pmbus_figure_from_the_first_readable_labelled_channel(tmp_path: Path) -> None:
    # Two outputs (vout1 unreadable right now, vout2 fine), a channel without a label, and an
    # input that fails later: each figure from the first readable channel labelled for it.
    files = {**psu_files(3, 52000), "/sys/class/hwmon/hwmon3/in2_input": "x\n",
             "/sys/class/hwmon/hwmon3/in3_label": "vout2\n", "/sys/class/hwmon/hwmon3/in3_input": "5012\n",
             "/sys/class/hwmon/hwmon3/in0_input": "900\n"}
    tree = write_tree(tmp_path, files)
    collector = HwmonPowerCollector(HostRoot(tmp_path), PsuHwmonSection())
    (psu,) = [r for r in collector.collect() if isinstance(r, PmbusPsuReading)]
    assert (psu.vin_volts, psu.vout_volts, psu.iout_amps) == (231.5, 5.012, 52.0)
    tree.write("/sys/class/hwmon/hwmon3/in2_input", "12010\n")
    tree.write("/sys/class/hwmon/hwmon3/curr2_input", "n/a\n")
    (psu,) = [r for r in collector.collect() if isinstance(r, PmbusPsuReading)]
    assert (psu.vout_volts, psu.iout_amps, psu.pout_w) == (12.01, None, 640.0)


def test_a_tick_reads_only_the_files_it_reports(tmp_path: Path) -> None:
    # A Super I/O chip also has current and power inputs and fan, temperature and intrusion
    # alarms, none of them reported here; a PSU with a second output reads it only while the
    # first is unreadable.
    files = {**NCT6779, "/sys/class/hwmon/hwmon1/curr1_input": "700\n", "/sys/class/hwmon/hwmon1/power1_input": "9\n",
             "/sys/class/hwmon/hwmon1/fan1_alarm": "1\n", "/sys/class/hwmon/hwmon1/temp1_alarm": "0\n",
             "/sys/class/hwmon/hwmon1/intrusion0_alarm": "1\n",
             **psu_files(3, 52000), "/sys/class/hwmon/hwmon3/in3_label": "vout2\n",
             "/sys/class/hwmon/hwmon3/in3_input": "5012\n"}
    tree = write_tree(tmp_path, files)
    root = ReadLog(tmp_path)
    collector = HwmonPowerCollector(root, PsuHwmonSection(scale={"nct6779/in4": 6.6}))
    first = collector.collect()
    root.read.clear()
    assert collector.collect() == first
    assert sorted(root.read) == sorted(f"/sys/class/hwmon/{f}" for f in [
        "hwmon1/in0_input", "hwmon1/in4_input", "hwmon1/in4_alarm",
        "hwmon3/in1_input", "hwmon3/in2_input", "hwmon3/curr1_input", "hwmon3/curr2_input",
        "hwmon3/power1_input", "hwmon3/power2_input", "hwmon3/temp1_input", "hwmon3/fan1_input",
        "hwmon3/in2_lcrit_alarm"])
    tree.write("/sys/class/hwmon/hwmon3/in2_input", "x\n")
    root.read.clear()
    (psu,) = [r for r in collector.collect() if isinstance(r, PmbusPsuReading)]
    assert psu.vout_volts == 5.012
    assert "/sys/class/hwmon/hwmon3/in3_input" in root.read


def test_no_voltage_sensors_is_absent(tmp_path: Path) -> None:
    write_tree(tmp_path, {"/sys/class/hwmon/hwmon0/name": "k10temp\n", "/sys/class/hwmon/hwmon0/temp1_input": "1\n"})
    with pytest.raises(NoData):
        HwmonPowerCollector(HostRoot(tmp_path), PsuHwmonSection()).collect()


def test_shares_need_a_real_load() -> None:
    assert current_shares([1.0, 2.0], 20) == [(None, None, False)] * 2
    assert current_shares([50.0, None, 50.0], 20) == [(50.0, 0.0, False), (None, None, False), (50.0, 0.0, False)]
    assert parse_channel_names(["in10_input", "in2_input", "in2_label", "intrusion0_input"], "in") == ["in2", "in10"]


def test_simulated_psus_read_by_the_collector(tmp_path: Path) -> None:
    rail = SimPsuRail(pty=False, psus=3)
    rail.share_weights = [1.0, 1.0, 0.25]  # a corroded lug on the third PSU
    node = SimNode(name="n", tree=Tree(tmp_path), rng=random.Random(1), devices=[rail])
    node.load = 1.0
    for k in range(1, 5):
        node.step(float(k))
    psus = [r for r in HwmonPowerCollector(HostRoot(tmp_path), PsuHwmonSection()).collect()
            if isinstance(r, PmbusPsuReading)]
    assert len(psus) == 3 and psus[2].imbalanced and not psus[0].imbalanced
    # The simulator links each PSU's hwmon device to its I2C client like the kernel does.
    assert [p.sensor for p in psus] == ["1-0058", "1-0059", "1-005a"]
    assert sum(p.iout_amps or 0 for p in psus) == pytest.approx(rail.amps, abs=0.01)
