"""A simulated Super I/O chip is registered as the nct6775 driver registers it, below its platform device
(``nct6775.656``): two boots of a node whose drivers probed in another order (the Super I/O's hwmon device
hwmon1 one boot, hwmon0 the next, the CPU's chip the other way round) give its voltage inputs and its
temperatures the same names, those lm-sensors gives them (``nct6798-isa-0290/in4``)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rigmon.collectors.host import HostCollector
from rigmon.collectors.hwmon_power import HwmonPowerCollector
from rigmon.config import PsuHwmonSection
from rigmon.hw.root import HostRoot
from rigmon.schema import HwmonVoltageReading, TemperatureReading
from rigmon.sim.host import SimHost
from rigmon.sim.node import SimNode
from rigmon.sim.superio import SimSuperIo
from rigmon.sim.tree import Tree
from tests.collectors.test_host import FakeClock

#: The board's dividers before the +5 V and +12 V inputs, as sensors.conf's compute lines give them.
SCALE = {"nct6798/in1": 5.0, "nct6798/in4": 12.0}


def boot(root: Path, superio_hwmon: int, cpu_hwmon: int) -> tuple[dict[str, HwmonVoltageReading], set[str]]:
    """The voltage inputs (by sensor) and the temperature sensors of a Xeon workstation under full load,
    booted with its Super I/O's hwmon device as ``hwmon<superio_hwmon>`` and its CPU's as ``hwmon<cpu_hwmon>``."""
    node = SimNode(name="n", tree=Tree(root), rng=random.Random(1), devices=[
        SimHost(cpu_vendor="intel", cpu_hwmon=cpu_hwmon), SimSuperIo(hwmon_number=superio_hwmon)])
    node.load = 1.0
    node.step(1.0)
    volts = HwmonPowerCollector(HostRoot(root), PsuHwmonSection(scale=SCALE)).collect()
    temps = HostCollector(HostRoot(root), FakeClock()).collect()
    return ({v.sensor: v for v in volts if isinstance(v, HwmonVoltageReading)},
            {t.sensor for t in temps if isinstance(t, TemperatureReading)})


def test_two_boots_probed_in_another_order_name_the_same_voltage_inputs(tmp_path: Path) -> None:
    first, first_temps = boot(tmp_path / "boot1", superio_hwmon=1, cpu_hwmon=0)
    second, second_temps = boot(tmp_path / "boot2", superio_hwmon=0, cpu_hwmon=1)
    assert list(first) == list(second) == [f"nct6798-isa-0290/in{n}" for n in (0, 1, 2, 3, 4, 7, 8)]
    assert first == second
    twelve = first["nct6798-isa-0290/in4"]
    # 12.10 V less 0.15 V at full load, behind 12:1: 0.992 V at the pin, in the ADC's 8 mV steps.
    assert (twelve.chip, twelve.label, twelve.scale) == ("nct6798", "in4", 12.0)
    assert twelve.volts == pytest.approx(11.904) and twelve.alarm is False
    assert (twelve.min_volts, twelve.max_volts) == (pytest.approx(11.424), pytest.approx(12.768))
    assert first["nct6798-isa-0290/in8"].volts == pytest.approx(3.184)  # halved by the chip, reported whole
    # Its temperatures are named by the same chip name, by the host collector.
    assert first_temps == second_temps == {
        "x86_pkg_temp", "coretemp-isa-0000/Package id 0", "nct6798-isa-0290/SYSTIN", "nct6798-isa-0290/CPUTIN"}


def test_the_chip_is_a_platform_device_with_its_hwmon_device_below_it(tmp_path: Path) -> None:
    chip = SimSuperIo(hwmon_number=3)
    tree = Tree(tmp_path)
    SimNode(name="n", tree=tree, rng=random.Random(1), devices=[chip]).step(1.0)
    root = HostRoot(tmp_path)
    assert root.realpath("/sys/class/hwmon/hwmon3") == "/sys/devices/platform/nct6775.656/hwmon/hwmon3"
    assert root.realpath("/sys/class/hwmon/hwmon3/device") == "/sys/devices/platform/nct6775.656"
    assert root.readlink("/sys/devices/platform/nct6775.656/subsystem") == "../../../bus/platform"
    # The driver reloaded, registered as hwmon5 now: the same name.
    chip.hwmon.reregister(5)
    chip.write(tree)
    volts = HwmonPowerCollector(root, PsuHwmonSection()).collect()
    assert {v.sensor for v in volts if isinstance(v, HwmonVoltageReading)} == {
        f"nct6798-isa-0290/in{n}" for n in (0, 1, 2, 3, 4, 7, 8)}
    assert not tree.path("/sys/class/hwmon/hwmon3").exists()
