"""Host temperatures are named the same every boot: an hwmon chip by its libsensors name (its ``name`` and its
device's bus and address) and its input's label, a thermal zone by its type, whatever ``hwmonN`` and
``thermal_zoneN`` the kernel's probe order gave them this boot (kept in ``input_path``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.collectors.host import HostCollector
from rigmon.collectors.host_chip_names import (
    input_names,
    parse_chip_bus,
    read_chip_name,
    zone_sensors,
)
from rigmon.hw.root import HostRoot
from rigmon.schema import TemperatureReading
from rigmon.sim.tree import Tree
from tests.collectors.test_host import FakeClock
from tests.collectors.test_host_temperatures import BASE

K10TEMP = "/sys/devices/pci0000:00/0000:00:18.3"
NVME_PCI = "/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0"
NVME_CTRL = f"{NVME_PCI}/nvme/nvme0"
CORETEMP = "/sys/devices/platform/coretemp.0"


@pytest.mark.parametrize(("dev_name", "subsystem", "bus"), [
    ("0000:00:18.3", "pci", "pci-00c3"),        # k10temp: the data fabric's function 3
    ("0000:01:00.0", "pci", "pci-0100"),        # an NVMe drive's PCI function
    ("0001:c3:00.0", "pci", "pci-1c300"),       # a second PCI domain: more than four digits
    ("coretemp.0", "platform", "isa-0000"),
    ("nct6775.656", "platform", "isa-0290"),    # a Super I/O at I/O port 0x290
    ("dell_smm_hwmon", "platform", "isa-0000"),  # a platform device without a number
    ("7-004c", "i2c", "i2c-7-4c"),
    ("9191-0290", "i2c", "isa-0290"),           # the legacy ISA pseudo-adapter
    ("spi0.1", "spi", "spi-0-1"),
    ("LNXTHERM:00", "acpi", "acpi-0"),
    ("0003:1B1C:0C1C.0005", "hid", "hid-3-5"),
    ("stmmac-0:01", "mdio_bus", "mdio-1"),
    ("2:0:0:0", "scsi", "scsi-2-0"),            # drivetemp
    ("nvme0", "nvme", None),                    # a class device: its parent names it
    ("thermal_zone0", "thermal", None),
    ("0000:00:18.3", None, "pci-00c3"),         # no subsystem link: by the name's form
    ("nvme0", None, None),                      # ... never a platform device
])
def test_the_bus_part_of_a_chip_name_is_libsensors(dev_name: str, subsystem: str | None, bus: str | None) -> None:
    assert parse_chip_bus(dev_name, subsystem) == bus


def _chip(tree: Tree, device: str, number: int, name: str, files: dict[str, str]) -> None:
    """An hwmon device ``hwmon<number>`` registered below ``device`` as the kernel does it: its directory,
    ``device`` link and class link."""
    hwmon = f"{device}/hwmon/hwmon{number}" if not device.endswith("/nvme0") else f"{device}/hwmon{number}"
    tree.write(f"{hwmon}/name", f"{name}\n")
    for file, value in files.items():
        tree.write(f"{hwmon}/{file}", value)
    up = hwmon.count("/") - device.count("/") + 1  # to the device's parent, then down to the device
    tree.symlink(f"{hwmon}/device", "../" * up + device.rsplit("/", 1)[-1])
    tree.symlink(f"/sys/class/hwmon/hwmon{number}", "../../.." + hwmon)


def _devices(tree: Tree) -> None:
    """k10temp's and an NVMe drive's devices with their ``subsystem`` links (and the controller's ``device``)."""
    tree.write(f"{K10TEMP}/vendor", "0x1022\n")
    tree.symlink(f"{K10TEMP}/subsystem", "../../../bus/pci")
    tree.write(f"{NVME_PCI}/vendor", "0x144d\n")
    tree.symlink(f"{NVME_PCI}/subsystem", "../../../../bus/pci")
    tree.write(f"{NVME_CTRL}/state", "live\n")
    tree.symlink(f"{NVME_CTRL}/subsystem", "../../../../../../class/nvme")
    tree.symlink(f"{NVME_CTRL}/device", "../../../0000:01:00.0")


def _boot(root: Path, k10temp: int, nvme: int, zones: tuple[str, ...]) -> list[TemperatureReading]:
    """The host temperatures of one boot of a node whose k10temp and NVMe hwmon devices are
    ``hwmon<k10temp>`` and ``hwmon<nvme>``, and whose thermal zones have the types ``zones`` in order."""
    tree = Tree(root)
    for rel, content in BASE.items():
        if "/hwmon/" not in rel and "/thermal/" not in rel:
            tree.write(rel, content)
    _devices(tree)
    _chip(tree, K10TEMP, k10temp, "k10temp", {"temp1_input": "61250\n", "temp1_label": "Tctl\n",
                                             "temp3_input": "55500\n", "temp3_label": "Tccd1\n"})
    _chip(tree, NVME_CTRL, nvme, "nvme", {"temp1_input": "38850\n", "temp1_label": "Composite\n",
                                          "temp2_input": "40850\n", "temp2_label": "Sensor 1\n"})
    for n, zone_type in enumerate(zones):
        tree.write(f"/sys/class/thermal/thermal_zone{n}/type", f"{zone_type}\n")
        tree.write(f"/sys/class/thermal/thermal_zone{n}/temp", f"{50000 + 1000 * zones[:n].count(zone_type)}\n")
    return [r for r in HostCollector(HostRoot(root), FakeClock()).collect() if isinstance(r, TemperatureReading)]


def test_two_boots_that_number_the_chips_and_zones_otherwise_name_the_same_sensors(tmp_path: Path) -> None:
    # The kernel probed k10temp first one boot and the NVMe drive first the next: hwmon0 <-> hwmon2. Its
    # ACPI zone came before the packages' one boot and between them the next.
    first = _boot(tmp_path / "boot1", k10temp=0, nvme=2, zones=("x86_pkg_temp", "acpitz", "x86_pkg_temp"))
    second = _boot(tmp_path / "boot2", k10temp=2, nvme=0, zones=("acpitz", "x86_pkg_temp", "x86_pkg_temp"))
    named = {t.sensor: (t.label, t.temp_c) for t in first}
    assert named == {t.sensor: (t.label, t.temp_c) for t in second} == {
        "x86_pkg_temp": ("x86_pkg_temp", 50.0),
        "x86_pkg_temp-1": ("x86_pkg_temp", 51.0),  # the second package, registered after the first
        "acpitz": ("acpitz", 50.0),
        "k10temp-pci-00c3/Tctl": ("k10temp Tctl", 61.25),
        "k10temp-pci-00c3/Tccd1": ("k10temp Tccd1", 55.5),
        "nvme-pci-0100/Composite": ("nvme Composite", 38.85),  # through its controller to its PCI function
        "nvme-pci-0100/Sensor 1": ("nvme Sensor 1", 40.85),
    }
    # The file of this boot stays where the operator finds it.
    paths = {boot: {t.sensor: t.input_path for t in temps} for boot, temps in (("1", first), ("2", second))}
    assert paths["1"]["k10temp-pci-00c3/Tctl"] == "/sys/class/hwmon/hwmon0/temp1_input"
    assert paths["2"]["k10temp-pci-00c3/Tctl"] == "/sys/class/hwmon/hwmon2/temp1_input"
    assert paths["1"]["acpitz"] == "/sys/class/thermal/thermal_zone1/temp"
    assert paths["2"]["acpitz"] == "/sys/class/thermal/thermal_zone0/temp"


def test_a_chip_is_named_by_the_device_its_link_names(tmp_path: Path) -> None:
    tree = Tree(tmp_path)
    _devices(tree)
    _chip(tree, K10TEMP, 4, "k10temp", {"temp1_input": "40000\n"})
    _chip(tree, NVME_CTRL, 1, "nvme", {"temp1_input": "40000\n"})
    tree.symlink(f"{CORETEMP}/subsystem", "../../../bus/platform")
    _chip(tree, CORETEMP, 3, "coretemp", {"temp1_input": "40000\n"})
    tree.write("/sys/class/hwmon/hwmon7/name", "acpitz\n")  # a thermal zone's: no device on a bus
    root = HostRoot(tmp_path)
    assert [read_chip_name(root, f"/sys/class/hwmon/hwmon{n}", name)
            for n, name in ((4, "k10temp"), (1, "nvme"), (3, "coretemp"), (7, "acpitz"))] == [
        "k10temp-pci-00c3", "nvme-pci-0100", "coretemp-isa-0000", "acpitz-virtual-0"]


def test_two_chips_of_one_name_keep_their_hwmon_numbers(tmp_path: Path) -> None:
    # Two virtual devices of one driver (no device link): one name cannot tell them apart.
    tree = Tree(tmp_path)
    for rel, content in BASE.items():
        if "/hwmon/" not in rel:
            tree.write(rel, content)
    for n, millideg in ((3, "41000\n"), (5, "43000\n")):
        tree.write(f"/sys/class/hwmon/hwmon{n}/name", "iwlwifi_1\n")
        tree.write(f"/sys/class/hwmon/hwmon{n}/temp1_input", millideg)
    temps = [r for r in HostCollector(HostRoot(tmp_path), FakeClock()).collect() if isinstance(r, TemperatureReading)]
    assert [t.sensor for t in temps] == ["x86_pkg_temp", "hwmon3/temp1", "hwmon5/temp1"]


def test_an_input_is_named_by_its_label_unless_another_input_shares_it() -> None:
    assert input_names([("temp1", "Tctl"), ("temp3", "Tccd1"), ("temp4", None)]) == ["Tctl", "Tccd1", "temp4"]
    assert input_names([("temp1", "CPU"), ("temp2", "CPU"), ("temp3", "")]) == ["temp1", "temp2", "temp3"]


def test_zones_of_one_type_are_numbered_in_their_order() -> None:
    assert zone_sensors(["acpitz", "x86_pkg_temp", "acpitz", "x86_pkg_temp", "iwlwifi_1"]) == [
        "acpitz", "x86_pkg_temp", "acpitz-1", "x86_pkg_temp-1", "iwlwifi_1"]
