"""Wire records of the host collector: CPU, load, memory and temperature sensors."""

from __future__ import annotations

from rigmon.schema.record import Record


class HostReading(Record, frozen=True):
    """CPU, load and memory of the node."""

    cpu_pct: float | None
    cpu_count: int | None
    load_1: float | None
    load_5: float | None
    load_15: float | None
    mem_total_bytes: int | None
    mem_available_bytes: int | None
    swap_total_bytes: int | None
    swap_free_bytes: int | None
    uptime_s: float | None
    boot_id: str | None


class TemperatureReading(Record, frozen=True):
    """One temperature sensor: a thermal zone or an hwmon ``temp*_input``."""

    sensor: str
    label: str
    temp_c: float
    #: The sensor's high limit (hwmon ``tempN_max``: an NVMe drive's warning temperature, where
    #: it throttles; a thermal zone's ``hot`` trip point), ``None`` when it has none (a chip or zone
    #: without one, an older agent).
    max_c: float | None = None
    #: The sensor's critical limit (hwmon ``tempN_crit``; a thermal zone's ``critical`` trip point,
    #: where the kernel shuts the machine down), ``None`` when it has none.
    crit_c: float | None = None
    #: Whether ``temp_c`` is at or over ``crit_c`` (what the default rule host_temp_critical selects),
    #: ``None`` when the sensor has no critical limit or the agent is older.
    over_crit: bool | None = None
