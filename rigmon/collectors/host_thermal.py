"""Thermal zones of the host collector: a zone's facts (its type, ``temp`` path and the limits its trip
points give) and the pure parsers of its trip points."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rigmon.collectors.sysfs_values import parse_millidegrees
from rigmon.hw.root import HostRoot

THERMAL = "/sys/class/thermal"

#: The trip point types that are limits of the zone's temperature (`thermal_trip_type_name` in the kernel's
#: drivers/thermal/thermal_trip.c names four). ``critical``: the kernel shuts the machine down there (the
#: zone's ``crit_c``, as an hwmon ``tempN_crit``); ``hot``: the platform is told the zone is too hot (its
#: ``max_c``, as an hwmon ``tempN_max``). ``passive`` and ``active`` are not limits but cooling policies:
#: where the kernel starts to throttle the CPU (passive) or to spin a fan (active): a zone past them is
#: being cooled as intended, not in trouble, so they are never shown as limits.
TRIP_LIMITS = {"hot": "max", "critical": "crit"}


@dataclass(frozen=True, slots=True)
class ZoneFacts:
    """What a tick needs about one thermal zone, read with its facts (its trip points do not change
    while it is registered).

    Attributes:
        label: its ``type`` (``x86_pkg_temp``, ``acpitz``), or its directory's name when unreadable.
        temp_path: its ``temp`` file.
        max_c: its ``hot`` trip point (°C), ``None`` when it lists none.
        crit_c: its ``critical`` trip point (°C), ``None`` when it lists none.
    """

    label: str
    temp_path: str
    max_c: float | None = None
    crit_c: float | None = None


def parse_trip_points(trips: Iterable[tuple[str | None, str | None]]) -> tuple[float | None, float | None]:
    """A zone's high and critical limits (°C) from its trip points' ``(type, temp)`` texts.

    ``trip_point_0_type`` holds ``critical``, ``trip_point_0_temp`` ``105000`` (millidegrees C). A trip
    of another type (passive, active: cooling policies, see `TRIP_LIMITS`), an unreadable or garbled
    type or temperature, or one at or below 0 °C (a disabled trip reads ``-274000``, THERMAL_TEMP_INVALID;
    an unprogrammed one 0, as an hwmon limit of 0) is no limit. Of several trips of one type the lowest
    counts: the first one the zone reaches.

    Returns:
        ``(max_c, crit_c)``: the lowest ``hot`` and ``critical`` trip, each ``None`` when there is none.
    """
    found: dict[str, float] = {}
    for type_text, temp_text in trips:
        limit = TRIP_LIMITS.get((type_text or "").strip())
        temp_c = parse_millidegrees(temp_text)
        if limit is None or temp_c is None or temp_c <= 0:
            continue
        found[limit] = min(temp_c, found.get(limit, temp_c))
    return found.get("max"), found.get("crit")


def trip_indices(entries: Iterable[str]) -> list[str]:
    """The trip points (``"0"``, ``"1"``...) a zone directory's listing has both files of, in order."""
    present = set(entries)
    indices = {e[len("trip_point_"):-len("_type")] for e in present
               if e.startswith("trip_point_") and e.endswith("_type")}
    return sorted((i for i in indices if i.isdigit() and f"trip_point_{i}_temp" in present), key=int)


def read_zone_facts(root: HostRoot, zone: str) -> ZoneFacts:
    """Zone ``zone``'s (``thermal_zone0``) type, ``temp`` path and the limits its trip points give.

    A trip point file that vanished or holds garbage (a zone unregistered while it is read, a driver's
    bad read) is no limit, never an error: the zone's temperature is still read.
    """
    base = f"{THERMAL}/{zone}"
    read = root.read_attr
    trips = [(read(f"{base}/trip_point_{i}_type"), read(f"{base}/trip_point_{i}_temp"))
             for i in trip_indices(root.listdir(base))]
    max_c, crit_c = parse_trip_points(trips)
    return ZoneFacts(label=read(f"{base}/type") or zone, temp_path=f"{base}/temp", max_c=max_c, crit_c=crit_c)
