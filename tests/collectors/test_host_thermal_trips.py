"""Host collector: each thermal zone carries the limits of its trip points (``critical`` -> ``crit_c``,
``hot`` -> ``max_c``; passive and active trips are cooling policies, not limits), read with the zone's
facts, and a reading says whether it is at or over its critical limit (``over_crit``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.collectors.host import HostCollector
from rigmon.collectors.host_thermal import parse_trip_points, trip_indices
from rigmon.schema import TemperatureReading
from rigmon.sim import write_tree
from tests.collectors.root_helpers import ReadLog
from tests.collectors.test_host import FakeClock
from tests.collectors.test_host_temp_limits import FILES as HWMON_FILES
from tests.collectors.test_host_temperatures import BASE

ZONE0 = "/sys/class/thermal/thermal_zone0"
ZONE1 = "/sys/class/thermal/thermal_zone1"

FILES = {
    **BASE,
    # x86_pkg_temp as thermald leaves it: two passive trips, one unprogrammed (0). No limit.
    f"{ZONE0}/trip_point_0_type": "passive\n",
    f"{ZONE0}/trip_point_0_temp": "95000\n",
    f"{ZONE0}/trip_point_1_type": "passive\n",
    f"{ZONE0}/trip_point_1_temp": "0\n",
    # acpitz: a fan (active), the platform's hot and the shutdown (critical) trips.
    f"{ZONE1}/type": "acpitz\n",
    f"{ZONE1}/temp": "105000\n",
    f"{ZONE1}/trip_point_0_type": "critical\n",
    f"{ZONE1}/trip_point_0_temp": "105000\n",
    f"{ZONE1}/trip_point_1_type": "hot\n",
    f"{ZONE1}/trip_point_1_temp": "100000\n",
    f"{ZONE1}/trip_point_2_type": "active\n",
    f"{ZONE1}/trip_point_2_temp": "60000\n",
    f"{ZONE1}/trip_point_2_hyst": "2000\n",
}


def _limits(collector: HostCollector) -> dict[str, tuple[float, float | None, float | None, bool | None]]:
    return {t.sensor: (t.temp_c, t.max_c, t.crit_c, t.over_crit)
            for t in collector.collect() if isinstance(t, TemperatureReading)}


def test_zones_carry_their_hot_and_critical_trips_read_once_per_zone(tmp_path: Path) -> None:
    tree = write_tree(tmp_path, FILES)
    root = ReadLog(tmp_path)
    collector = HostCollector(root, FakeClock())
    assert _limits(collector) == {
        "x86_pkg_temp": (52.0, None, None, None),
        "acpitz": (105.0, 100.0, 105.0, True),
        "k10temp-virtual-0/Tctl": (45.25, None, None, None),
    }
    root.read.clear()
    tree.write(f"{ZONE1}/temp", "99500\n")
    for _ in range(3):
        assert _limits(collector)["acpitz"] == (99.5, 100.0, 105.0, False)
    # Facts: a tick reads the temperatures only.
    assert not [r for r in root.read if "trip_point" in r]


def test_hwmon_temperatures_say_whether_they_are_at_their_critical_limit(tmp_path: Path) -> None:
    write_tree(tmp_path, HWMON_FILES)
    limits = _limits(HostCollector(ReadLog(tmp_path), FakeClock()))
    assert limits["coretemp-virtual-0/Package id 0"] == (100.0, 80.0, 100.0, True)    # coretemp at TjMax: at, not over
    assert limits["nvme-virtual-0/Composite"] == (82.05, 81.85, 84.85, False)  # an NVMe over WCTEMP, under CCTEMP
    assert limits["nct6779-virtual-0/temp1"] == (35.0, None, None, None)


class VanishingTrips(ReadLog):
    """A root whose zone loses its trip point files between its listing and their read (the zone
    unregistered while its facts are read, a driver unloaded)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.tmp = root

    def listdir(self, rel: str) -> list[str]:
        entries = super().listdir(rel)
        if rel == ZONE1:
            for trip in (self.tmp / ZONE1.lstrip("/")).glob("trip_point_*"):
                trip.unlink()
        return entries


def test_garbled_or_vanished_trip_points_are_no_limit(tmp_path: Path) -> None:
    write_tree(tmp_path, {
        **FILES,
        f"{ZONE0}/trip_point_0_type": "crit\xadical\n",       # garbled type
        f"{ZONE0}/trip_point_0_temp": "105000\n",
        f"{ZONE0}/trip_point_1_type": "critical\n",
        f"{ZONE0}/trip_point_1_temp": "1O5000\n",             # garbled temperature
        f"{ZONE0}/trip_point_2_type": "hot\n",
        f"{ZONE0}/trip_point_2_temp": "-274000\n",            # THERMAL_TEMP_INVALID: a disabled trip
        f"{ZONE0}/trip_point_3_type": "critical\n",           # no temperature file
        f"{ZONE0}/trip_point_4_temp": "90000\n",              # no type file
    })
    limits = _limits(HostCollector(VanishingTrips(tmp_path), FakeClock()))
    assert limits["x86_pkg_temp"] == (52.0, None, None, None)
    assert limits["acpitz"] == (105.0, None, None, None)


@pytest.mark.parametrize(("trips", "limits"), [
    ([("critical", "105000"), ("hot", "100000"), ("passive", "95000"), ("active", "60000")], (100.0, 105.0)),
    ([("critical\n", "120000"), ("critical", "110000")], (None, 110.0)),  # the lowest: reached first
    ([("passive", "95000"), ("active", "50000")], (None, None)),
    ([("critical", "0"), ("hot", "-274000")], (None, None)),
    ([("critical", None), (None, "100000"), ("critical", ""), ("critical", "x")], (None, None)),
    ([], (None, None)),
])
def test_parse_trip_points(trips: list[tuple[str | None, str | None]],
                           limits: tuple[float | None, float | None]) -> None:
    assert parse_trip_points(trips) == limits


def test_trip_indices_need_both_files_and_go_in_order() -> None:
    entries = ["trip_point_10_type", "trip_point_10_temp", "trip_point_2_type", "trip_point_2_temp",
               "trip_point_2_hyst", "trip_point_3_type", "trip_point_x_type", "trip_point_x_temp", "type", "temp"]
    assert trip_indices(entries) == ["2", "10"]
