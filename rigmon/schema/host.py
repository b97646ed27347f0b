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

    #: Its name, the same every boot: an hwmon chip's libsensors name and the input's label, or its
    #: channel when it has none (``k10temp-pci-00c3/Tctl``, ``nvme-pci-6400/Composite``,
    #: ``nct6798-isa-0290/temp3``); a PMBus PSU's I2C client and channel (``7-0058/temp1``); a thermal
    #: zone's type (``x86_pkg_temp``, a second zone of that type ``x86_pkg_temp-1``). An agent older
    #: than these names (and a chip another one shares its name with) names it by the kernel's
    #: numbering of this boot (``hwmon3/temp1``, ``thermal_zone0``).
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
    #: The file the temperature is read from this boot (``/sys/class/hwmon/hwmon3/temp1_input``,
    #: ``/sys/class/thermal/thermal_zone0/temp``): where the operator finds the sensor, whose ``hwmonN``
    #: or ``thermal_zoneN`` the kernel numbers in probe order. ``None`` from an older agent.
    input_path: str | None = None
