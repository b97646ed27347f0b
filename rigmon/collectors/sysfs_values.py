"""Pure parsers of single sysfs/hwmon attribute values, shared by the collectors that read them."""

from __future__ import annotations

#: hwmon and thermal-zone temperatures are in millidegrees Celsius.
MILLI = 1000.0
#: The largest number the kernel prints (a u64), and its digits: a longer number in a sysfs or
#: procfs file is garbage (a driver's bad read); int() fails past 4300 digits, a float past 10**308,
#: and a frame cannot carry more than 64 bits.
U64_MAX = 2**64 - 1
U64_DIGITS = len(str(U64_MAX))
#: A kernel attribute prints at most a 64-bit integer (u64 or s64).
INT_MIN = -(2**63)
INT_MAX = U64_MAX


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
