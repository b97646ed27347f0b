"""Pure parsers of single sysfs/hwmon attribute values, shared by the collectors that read them."""

from __future__ import annotations

#: hwmon and thermal-zone temperatures are in millidegrees Celsius.
MILLI = 1000.0
#: A kernel attribute prints at most a 64-bit integer (u64 or s64): a longer number is garbage
#: (a driver's bad read), and one past 10**308 does not even become a float (OverflowError).
INT_MIN = -(2**63)
INT_MAX = 2**64 - 1


def parse_int(text: str | None) -> int | None:
    """An integer attribute (``"16"``), ``None`` when absent, not a number or beyond 64 bits."""
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if INT_MIN <= value <= INT_MAX else None


def parse_millidegrees(text: str | None) -> float | None:
    """A thermal or hwmon temperature in millidegrees Celsius, as degrees (``38850`` -> 38.85)."""
    value = parse_int(text)
    return None if value is None else value / MILLI
