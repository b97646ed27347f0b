"""hwmon power collector: a PMBus supply's figures to 4 decimals from any value a driver prints,
its alarms, and its sensor name while supplies come and go between ticks."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rigmon.collectors.hwmon_power import MILLI, HwmonPowerCollector
from rigmon.collectors.sysfs_values import INT_MIN, U64_MAX
from rigmon.config import PsuHwmonSection
from rigmon.hw.root import HostRoot
from rigmon.schema import PmbusPsuReading
from rigmon.sim import write_tree
from rigmon.sim.tree import Tree
from tests.collectors.test_hwmon_power import psu_files, psu_on_i2c

PSU = "/sys/class/hwmon/hwmon3"


def _psus(collector: HwmonPowerCollector) -> list[PmbusPsuReading]:
    return [r for r in collector.collect() if isinstance(r, PmbusPsuReading)]


@pytest.mark.parametrize(("millivolts", "volts"), [
    ("231499", 231.499), ("-1500", -1.5), ("0", 0.0), ("7", 0.007), ("1000000001", 1000000.001),
    (str(U64_MAX), U64_MAX / MILLI), (str(INT_MIN), INT_MIN / MILLI),
    ("12.5", None), ("", None), ("0x10", None), (str(U64_MAX + 1), None),  # not an hwmon number
])
def test_a_milli_figure_is_its_value_in_units(tmp_path: Path, millivolts: str, volts: float | None) -> None:
    write_tree(tmp_path, {**psu_files(3, 52000), f"{PSU}/in1_input": f"{millivolts}\n",
                          f"{PSU}/curr2_input": f"{millivolts}\n"})
    (psu,) = _psus(HwmonPowerCollector(HostRoot(tmp_path), PsuHwmonSection()))
    assert (psu.vin_volts, psu.iout_amps) == (volts, volts)


@pytest.mark.parametrize(("microwatts", "watts"), [
    ("690000000", 690.0), ("595120749", 595.1207), ("595120751", 595.1208), ("1", 0.0), ("-2500060", -2.5001),
    ("x", None),
])
def test_a_micro_figure_is_rounded_to_four_decimals(tmp_path: Path, microwatts: str, watts: float | None) -> None:
    write_tree(tmp_path, {**psu_files(3, 52000), f"{PSU}/power1_input": f"{microwatts}\n",
                          f"{PSU}/power2_input": f"{microwatts}\n"})
    (psu,) = _psus(HwmonPowerCollector(HostRoot(tmp_path), PsuHwmonSection()))
    assert (psu.pin_w, psu.pout_w) == (watts, watts)


def test_a_value_in_thousandths_is_already_rounded_to_four_decimals() -> None:
    # Why the collector divides millivolts and milliamperes without round(..., 4): the double
    # nearest v/1000 rounds to itself, for every number an hwmon file can hold.
    rng = random.Random(19)
    values = [rng.randrange(INT_MIN, U64_MAX + 1) for _ in range(20000)] + list(range(-20000, 20000))
    values += [sign * (2**k + d) for k in range(30, 64) for d in (-1, 0, 1) for sign in (1, -1)]
    assert [v for v in values if round(v / MILLI, 4) != v / MILLI] == []


def test_alarms_are_the_set_ones_in_channel_order(tmp_path: Path) -> None:
    tree = write_tree(tmp_path, {**psu_files(3, 52000), f"{PSU}/curr2_max_alarm": "1\n", f"{PSU}/in1_crit_alarm": "0\n",
                                 f"{PSU}/power2_cap_alarm": "garbled\n"})
    collector = HwmonPowerCollector(HostRoot(tmp_path), PsuHwmonSection())
    assert _psus(collector)[0].alarms == ("curr2_max",)
    tree.write(f"{PSU}/in2_lcrit_alarm", "1\n")
    tree.write(f"{PSU}/in1_crit_alarm", "1\n")
    assert _psus(collector)[0].alarms == ("curr2_max", "in1_crit", "in2_lcrit")
    for name in ("curr2_max", "in1_crit", "in2_lcrit"):
        tree.write(f"{PSU}/{name}_alarm", "0\n")
    assert _psus(collector)[0].alarms == ()


def test_psu_sensor_names_follow_supplies_that_come_and_go(tmp_path: Path) -> None:
    tree = Tree(tmp_path)
    psu_on_i2c(tree, 3, "7-0058", 50000)
    psu_on_i2c(tree, 4, "7-0059", 50000)
    collector = HwmonPowerCollector(HostRoot(tmp_path), PsuHwmonSection())
    assert [p.sensor for p in _psus(collector)] == ["7-0058", "7-0059"]
    # A second hwmon device of 7-0058 appears: neither may take the client's name.
    psu_on_i2c(tree, 5, "7-0058", 50000)
    assert [p.sensor for p in _psus(collector)] == ["hwmon3", "7-0059", "hwmon5"]
    assert [p.sensor for p in _psus(collector)] == ["hwmon3", "7-0059", "hwmon5"]
    tree.remove("/sys/class/hwmon/hwmon3")
    assert [p.sensor for p in _psus(collector)] == ["7-0059", "7-0058"]
    # As many supplies as before, others.
    tree.remove("/sys/class/hwmon/hwmon5")
    psu_on_i2c(tree, 6, "7-005b", 50000)
    assert [p.sensor for p in _psus(collector)] == ["7-0059", "7-005b"]
    # Re-registered on another client under the same hwmon name between two ticks (a new device
    # directory, as the kernel makes one): seen at the next tick.
    tree.renew_dir("/sys/class/hwmon/hwmon4")
    psu_on_i2c(tree, 4, "7-005a", 50000)
    assert [p.sensor for p in _psus(collector)] == ["7-005a", "7-005b"]
