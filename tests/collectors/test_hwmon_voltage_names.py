"""psu_hwmon names a Super I/O or BMC voltage input the same every boot: by its chip's libsensors name and its
channel (``nct6798-isa-0290/in4``), read once per registration; by ``hwmonN/inM`` only when two chips share a
name, as the host collector names their temperatures."""

from __future__ import annotations

import random
from pathlib import Path

from rigmon.collectors.host import HostCollector
from rigmon.collectors.hwmon_power import HwmonPowerCollector
from rigmon.config import PsuHwmonSection
from rigmon.hw.root import HostRoot
from rigmon.schema import HwmonVoltageReading, PmbusPsuReading, TemperatureReading
from rigmon.sim import write_tree
from rigmon.sim.host import SimHost
from rigmon.sim.node import SimNode
from rigmon.sim.psu import SimPsuRail
from rigmon.sim.superio import SimSuperIo, SuperIoInput
from rigmon.sim.tree import Tree
from tests.collectors.test_host import FakeClock

#: A +12 V input behind the board's 12:1 divider, and the CPU core voltage.
INPUTS = (SuperIoInput("in0", 1.05), SuperIoInput("in4", 12.10, divider=12.0))


class LinkLog(HostRoot):
    """A root that notes every link it follows or reads."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.links: list[str] = []

    def realpath(self, rel: str) -> str | None:
        self.links.append(rel)
        return super().realpath(rel)

    def readlink(self, rel: str) -> str | None:
        self.links.append(rel)
        return super().readlink(rel)


def voltages(collector: HwmonPowerCollector) -> dict[str, float]:
    return {r.sensor: r.volts for r in collector.collect() if isinstance(r, HwmonVoltageReading)}


def test_a_chip_is_named_by_its_device_and_its_name_read_once_per_registration(tmp_path: Path) -> None:
    chip = SimSuperIo(inputs=INPUTS, hwmon_number=2)
    node = SimNode(name="n", tree=Tree(tmp_path), rng=random.Random(1), devices=[chip])
    node.step(1.0)
    root = LinkLog(tmp_path)
    collector = HwmonPowerCollector(root, PsuHwmonSection(scale={"nct6798/in4": 12.0}))
    assert voltages(collector) == {"nct6798-isa-0290/in0": 1.048, "nct6798-isa-0290/in4": 12.096}
    assert root.links, "the chip's device link named it"
    root.links.clear()
    for _ in range(5):
        assert list(voltages(collector)) == ["nct6798-isa-0290/in0", "nct6798-isa-0290/in4"]
    assert root.links == []
    # The driver reloaded: registered again, as hwmon0 now. Its name is read again, and is the same.
    chip.hwmon.reregister(0)
    node.write()
    assert list(voltages(collector)) == ["nct6798-isa-0290/in0", "nct6798-isa-0290/in4"]
    assert "/sys/class/hwmon/hwmon0/device" in root.links


def test_a_device_link_that_does_not_read_at_a_later_read_keeps_the_name(tmp_path: Path) -> None:
    chip = SimSuperIo(inputs=INPUTS)
    tree = Tree(tmp_path)
    SimNode(name="n", tree=tree, rng=random.Random(1), devices=[chip]).step(1.0)
    collector = HwmonPowerCollector(HostRoot(tmp_path), PsuHwmonSection())
    assert list(voltages(collector)) == ["nct6798-isa-0290/in0", "nct6798-isa-0290/in4"]
    # Another chip registers (every chip's facts are read again) while the link does not read.
    tree.remove("/sys/devices/platform/nct6775.656/subsystem")
    write_tree(tmp_path, {"/sys/class/hwmon/hwmon7/name": "acpi_power_meter\n",
                          "/sys/class/hwmon/hwmon7/power1_average": "240000000\n"})
    assert list(voltages(collector)) == ["nct6798-isa-0290/in0", "nct6798-isa-0290/in4"]


def test_two_chips_of_one_name_are_named_by_their_hwmon_number_as_their_temperatures(tmp_path: Path) -> None:
    # Two chips of one driver on no bus that names them (a tree copied without its links): both
    # ``it87-virtual-0``. A Super I/O on its platform device and the PSUs keep their names.
    files = {}
    for hwmon in (4, 5):
        files |= {f"/sys/class/hwmon/hwmon{hwmon}/name": "it87\n", f"/sys/class/hwmon/hwmon{hwmon}/in3_input": "2980\n",
                  f"/sys/class/hwmon/hwmon{hwmon}/temp1_input": "36000\n"}
    tree = write_tree(tmp_path, files)
    rail = SimPsuRail(pty=False, psus=2)
    SimNode(name="n", tree=tree, rng=random.Random(1), devices=[
        SimHost(), SimSuperIo(inputs=INPUTS), rail]).step(1.0)
    records = HwmonPowerCollector(HostRoot(tmp_path), PsuHwmonSection()).collect()
    assert [r.sensor for r in records if isinstance(r, HwmonVoltageReading)] == [
        "nct6798-isa-0290/in0", "nct6798-isa-0290/in4", "hwmon4/in3", "hwmon5/in3"]
    assert [r.sensor for r in records if isinstance(r, PmbusPsuReading)] == ["1-0058", "1-0059"]
    temps = [t.sensor for t in HostCollector(HostRoot(tmp_path), FakeClock()).collect()
             if isinstance(t, TemperatureReading) and t.sensor.startswith(("hwmon", "nct", "it87"))]
    assert temps == ["nct6798-isa-0290/SYSTIN", "nct6798-isa-0290/CPUTIN", "hwmon4/temp1", "hwmon5/temp1"]
    # One of them gone: the other has its name to itself.
    tree.remove("/sys/class/hwmon/hwmon5")
    records = HwmonPowerCollector(HostRoot(tmp_path), PsuHwmonSection()).collect()
    assert [r.sensor for r in records if isinstance(r, HwmonVoltageReading)][-1] == "it87-virtual-0/in3"
