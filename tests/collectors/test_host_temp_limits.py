"""Host collector: each hwmon temperature carries its chip's limits (``tempN_max``, ``tempN_crit``),
read with the chip's facts, not every tick."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.collectors.host import HostCollector
from rigmon.collectors.host_hwmon import parse_temp_limit
from rigmon.schema import TemperatureReading
from rigmon.sim import write_tree
from rigmon.sim.nvme_drive import NVME_HWMON_FILES
from tests.collectors.root_helpers import ReadLog
from tests.collectors.test_host import FakeClock
from tests.collectors.test_host_temperatures import BASE

FILES = {
    **BASE,
    # coretemp: a package sensor with its high and critical limits.
    "/sys/class/hwmon/hwmon1/name": "coretemp\n",
    "/sys/class/hwmon/hwmon1/temp1_input": "100000\n",
    "/sys/class/hwmon/hwmon1/temp1_label": "Package id 0\n",
    "/sys/class/hwmon/hwmon1/temp1_max": "80000\n",
    "/sys/class/hwmon/hwmon1/temp1_crit": "100000\n",
    # A Super I/O channel given no limit reports 0: no limit, not one every temperature is over.
    "/sys/class/hwmon/hwmon3/name": "nct6779\n",
    "/sys/class/hwmon/hwmon3/temp1_input": "35000\n",
    "/sys/class/hwmon/hwmon3/temp1_max": "0\n",
    # An NVMe drive's hwmon chip as the simulator lists it, at 82 °C over its 81.85 °C warning limit.
    **{f"/sys/class/hwmon/hwmon2/{name}": value for name, value in NVME_HWMON_FILES.items()},
    "/sys/class/hwmon/hwmon2/temp1_input": "82050\n",
}


def _limits(collector: HostCollector) -> dict[str, tuple[float, float | None, float | None]]:
    return {t.sensor: (t.temp_c, t.max_c, t.crit_c) for t in collector.collect() if isinstance(t, TemperatureReading)}


def test_hwmon_temperatures_carry_their_limits_read_once_per_registration(tmp_path: Path) -> None:
    write_tree(tmp_path, FILES)
    root = ReadLog(tmp_path)
    collector = HostCollector(root, FakeClock())
    assert _limits(collector) == {
        "x86_pkg_temp": (52.0, None, None),
        "k10temp-virtual-0/Tctl": (45.25, None, None),
        "coretemp-virtual-0/Package id 0": (100.0, 80.0, 100.0),
        "nvme-virtual-0/Composite": (82.05, 81.85, 84.85),
        "nct6779-virtual-0/temp1": (35.0, None, None),
    }
    root.read.clear()
    for _ in range(3):
        assert _limits(collector)["nvme-virtual-0/Composite"] == (82.05, 81.85, 84.85)
    # Facts: a tick reads the inputs only.
    assert not [r for r in root.read if r.endswith(("_max", "_crit"))]


@pytest.mark.parametrize(("text", "limit_c"), [
    ("81850", 81.85), ("100000\n", 100.0), ("0", None), ("-273000", None), ("", None), (None, None), ("x", None),
])
def test_parse_temp_limit(text: str | None, limit_c: float | None) -> None:
    assert parse_temp_limit(text) == limit_c
