"""Pure parsers of single sysfs/hwmon attribute values, shared by the collectors that read them."""

from __future__ import annotations

#: hwmon and thermal-zone temperatures are in millidegrees Celsius.
MILLI = 1000.0


def parse_int(text: str | None) -> int | None:
    """An integer attribute (``"16"``), ``None`` when absent or not a number."""
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def parse_millidegrees(text: str | None) -> float | None:
    """A thermal or hwmon temperature in millidegrees Celsius, as degrees (``38850`` -> 38.85)."""
    value = parse_int(text)
    return None if value is None else value / MILLI
