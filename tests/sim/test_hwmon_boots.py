"""The simulator registers hwmon devices as the kernel does, with the ``device`` link by which a chip is
named: two boots of a node whose drivers probed in another order (the CPU's chip hwmon0 one boot, hwmon2 the
next, the NVMe drive's the other way round) give its temperatures the same names."""

from __future__ import annotations

import random
from pathlib import Path

from rigmon.collectors.host import HostCollector
from rigmon.hw.root import HostRoot
from rigmon.schema import TemperatureReading
from rigmon.sim.gpu import SimAmdGpu
from rigmon.sim.host import SimHost
from rigmon.sim.node import SimNode
from rigmon.sim.nvme_drive import SimNvmeDrive
from rigmon.sim.storage import SimStorage
from rigmon.sim.tree import Tree


class Clock:
    def time(self) -> float:
        return 1_700_000_000.0

    def monotonic(self) -> float:
        return 0.0


def boot(root: Path, cpu_vendor: str, cpu_hwmon: int, nvme_hwmon: int) -> dict[str, str | None]:
    """Sensor -> the file it is read from, of a Strix Halo-like node booted with its CPU's hwmon chip as
    ``hwmon<cpu_hwmon>``, its NVMe drive's as ``hwmon<nvme_hwmon>`` and its iGPU's as hwmon1."""
    drive = SimNvmeDrive(ctrl=0, address="0000:01:00.0")
    drive.hwmon.number = nvme_hwmon
    node = SimNode(name="n", tree=Tree(root), rng=random.Random(1), devices=[
        SimHost(cpu_vendor=cpu_vendor, cpu_hwmon=cpu_hwmon), SimStorage(drives=[drive]), SimAmdGpu(hwmon_number=1)])
    node.step(1.0)
    records = HostCollector(HostRoot(root), Clock()).collect()
    return {t.sensor: t.input_path for t in records if isinstance(t, TemperatureReading)}


def test_two_boots_probed_in_another_order_name_the_same_sensors(tmp_path: Path) -> None:
    first = boot(tmp_path / "boot1", "amd", cpu_hwmon=0, nvme_hwmon=2)
    second = boot(tmp_path / "boot2", "amd", cpu_hwmon=2, nvme_hwmon=0)
    assert set(first) == set(second) == {
        "acpitz", "k10temp-pci-00c3/Tctl", "nvme-pci-0100/Composite", "amdgpu-pci-c300/edge"}
    assert (first["k10temp-pci-00c3/Tctl"], second["k10temp-pci-00c3/Tctl"]) == (
        "/sys/class/hwmon/hwmon0/temp1_input", "/sys/class/hwmon/hwmon2/temp1_input")
    assert (first["nvme-pci-0100/Composite"], second["nvme-pci-0100/Composite"]) == (
        "/sys/class/hwmon/hwmon2/temp1_input", "/sys/class/hwmon/hwmon0/temp1_input")


def test_a_xeon_package_sensor_is_named_by_its_platform_device(tmp_path: Path) -> None:
    assert "coretemp-isa-0000/Package id 0" in boot(tmp_path, "intel", cpu_hwmon=3, nvme_hwmon=2)
