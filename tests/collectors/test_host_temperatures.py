"""Host collector: temperatures of thermal zones and hwmon chips that come and go between ticks,
what a tick reads once their facts are known, and /proc/loadavg and /proc/uptime edge cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.collectors.device_facts import REFRESH_EVERY
from rigmon.collectors.host import HostCollector
from rigmon.hw.root import HostRoot
from rigmon.schema import HostReading, TemperatureReading
from rigmon.sim import write_tree
from tests.collectors.root_helpers import ReadLog
from tests.collectors.test_host import NET_DEV_HEAD, FakeClock

BASE = {
    "/proc/stat": "cpu  100 0 0 900 0 0 0 0 0 0\ncpu0 100 0 0 900 0 0 0 0 0 0\n",
    "/proc/net/dev": NET_DEV_HEAD,
    "/sys/class/thermal/thermal_zone0/type": "x86_pkg_temp\n",
    "/sys/class/thermal/thermal_zone0/temp": "52000\n",
    "/sys/class/thermal/cooling_device0/type": "Processor\n",
    "/sys/class/hwmon/hwmon0/name": "k10temp\n",
    "/sys/class/hwmon/hwmon0/temp1_input": "45250\n",
    "/sys/class/hwmon/hwmon0/temp1_label": "Tctl\n",
}


def _temps(collector: HostCollector) -> list[tuple[str, str, float]]:
    return [(t.sensor, t.label, t.temp_c) for t in collector.collect() if isinstance(t, TemperatureReading)]


def test_temperatures_follow_zones_and_chips_that_come_and_go(tmp_path: Path) -> None:
    tree = write_tree(tmp_path, BASE)
    collector = HostCollector(HostRoot(tmp_path), FakeClock())
    assert _temps(collector) == [("x86_pkg_temp", "x86_pkg_temp", 52.0), ("k10temp-virtual-0/Tctl", "k10temp Tctl", 45.25)]
    tree.write("/sys/class/thermal/thermal_zone1/type", "acpitz\n")
    tree.write("/sys/class/thermal/thermal_zone1/temp", "30000\n")
    tree.write("/sys/class/hwmon/hwmon1/name", "nvme\n")
    tree.write("/sys/class/hwmon/hwmon1/temp1_input", "38850\n")
    tree.write("/sys/class/hwmon/hwmon1/temp2_input", "40850\n")
    tree.write("/sys/class/hwmon/hwmon1/temp2_label", "Sensor 1\n")
    assert _temps(collector) == [
        ("x86_pkg_temp", "x86_pkg_temp", 52.0), ("acpitz", "acpitz", 30.0),
        ("k10temp-virtual-0/Tctl", "k10temp Tctl", 45.25), ("nvme-virtual-0/temp1", "nvme temp1", 38.85),
        ("nvme-virtual-0/Sensor 1", "nvme Sensor 1", 40.85)]
    # A zone and a chip go.
    tree.remove("/sys/class/thermal/thermal_zone0")
    tree.remove("/sys/class/hwmon/hwmon1")
    assert _temps(collector) == [("acpitz", "acpitz", 30.0), ("k10temp-virtual-0/Tctl", "k10temp Tctl", 45.25)]
    # An input vanishes while its chip stays (read, absent: no reading), then comes back.
    tree.remove("/sys/class/hwmon/hwmon0/temp1_input")
    assert _temps(collector) == [("acpitz", "acpitz", 30.0)]
    tree.write("/sys/class/hwmon/hwmon0/temp1_input", "46000\n")
    tree.write("/sys/class/thermal/thermal_zone1/temp", "31000\n")
    assert _temps(collector) == [("acpitz", "acpitz", 31.0), ("k10temp-virtual-0/Tctl", "k10temp Tctl", 46.0)]


def test_a_relabelled_sensor_is_seen_when_the_facts_are_read_again(tmp_path: Path) -> None:
    tree = write_tree(tmp_path, BASE)
    collector = HostCollector(HostRoot(tmp_path), FakeClock())
    _temps(collector)
    tree.write("/sys/class/hwmon/hwmon0/temp1_label", "Tdie\n")
    tree.write("/sys/class/thermal/thermal_zone0/type", "acpitz\n")
    labels = [[label for _, label, _ in _temps(collector)] for _ in range(REFRESH_EVERY)]
    assert labels[0] == ["x86_pkg_temp", "k10temp Tctl"]  # facts, not read every tick
    assert labels[-1] == ["acpitz", "k10temp Tdie"]


def test_a_tick_reads_the_temperatures_and_lists_the_devices(tmp_path: Path) -> None:
    write_tree(tmp_path, BASE)
    root = ReadLog(tmp_path)
    collector = HostCollector(root, FakeClock())
    first = _temps(collector)
    root.read.clear()
    root.listed.clear()
    assert _temps(collector) == first
    assert [r for r in root.read if r.startswith("/sys/")] == [
        "/sys/class/thermal/thermal_zone0/temp", "/sys/class/hwmon/hwmon0/temp1_input"]
    assert root.listed == ["/sys/class/thermal", "/sys/class/hwmon"]


@pytest.mark.parametrize(("loadavg", "uptime", "load", "uptime_s"), [
    ("0.50 0.40 0.30 1/80 11206\n", "350735.47 234388.90\n", (0.5, 0.4, 0.3), 350735.47),
    ("  0.50 0.40 0.30\n\n", "  12.5\n", (0.5, 0.4, 0.3), 12.5),  # white space around
    ("0.50 0.40 0.30 1/80 11206" + " " * 3000 + "\n", "1.0" + " " * 3000, (0.5, 0.4, 0.3), 1.0),  # past a first read
    (" \n", "\n", (None, None, None), None),  # white space only
    ("0.50 0.40\n", "up\n", (None, None, None), None),  # cut short, garbled
    ("0.50 x 0.30\n", "-5 1\n", (None, None, None), None),
    (None, None, (None, None, None), None),  # absent
])
def test_loadavg_and_uptime(tmp_path: Path, loadavg: str | None, uptime: str | None,
                            load: tuple[float | None, ...], uptime_s: float | None) -> None:
    files = dict(BASE)
    if loadavg is not None:
        files["/proc/loadavg"] = loadavg
    if uptime is not None:
        files["/proc/uptime"] = uptime
    write_tree(tmp_path, files)
    host = next(r for r in HostCollector(HostRoot(tmp_path), FakeClock()).collect() if isinstance(r, HostReading))
    assert ((host.load_1, host.load_5, host.load_15), host.uptime_s) == (load, uptime_s)
