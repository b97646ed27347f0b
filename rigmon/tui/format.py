"""Text for figures: units, "—" for unknown, short ages. Pure functions, no Textual."""

from __future__ import annotations

MISSING = "—"


def volts(value: float | None) -> str:
    """``11.82 V``."""
    return MISSING if value is None else f"{value:.2f} V"


def watts(value: float | None) -> str:
    """``1234 W``."""
    return MISSING if value is None else f"{value:.0f} W"


def pct(value: float | None) -> str:
    """``45%``."""
    return MISSING if value is None else f"{value:.0f}%"


def of(present: int | None, total: int | None) -> str:
    """``3/4``; ``—`` when either is unknown."""
    return MISSING if present is None or total is None else f"{present}/{total}"


def rate(bytes_per_s: float | None) -> str:
    """Decimal throughput: ``512 kB/s``, ``183 MB/s``, ``1.07 GB/s``, ``12.3 GB/s``; at most 9
    cells, the width of the cluster row's storage and net columns (three figures)."""
    if bytes_per_s is None:
        return MISSING
    if bytes_per_s >= 1e9:
        gb = bytes_per_s / 1e9
        return f"{gb:.2f} GB/s" if gb < 9.995 else f"{gb:.1f} GB/s" if gb < 99.95 else f"{gb:.0f} GB/s"
    if bytes_per_s >= 1e6:
        return f"{bytes_per_s / 1e6:.0f} MB/s"
    return f"{bytes_per_s / 1e3:.0f} kB/s"


def size(count_bytes: int | None) -> str:
    """Binary size: ``251.9 GiB``."""
    if count_bytes is None:
        return MISSING
    value = float(count_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return MISSING


def age(seconds: float | None) -> str:
    """Short age: ``12s``, ``5m``, ``2h``, ``3d``."""
    if seconds is None:
        return MISSING
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds // 60:.0f}m"
    if seconds < 86400:
        return f"{seconds // 3600:.0f}h"
    return f"{seconds // 86400:.0f}d"


def number(value: float | None, digits: int = 2) -> str:
    """A plain number, or ``—``."""
    return MISSING if value is None else f"{value:.{digits}f}"


def rail(value: float | None) -> str:
    """Rail voltage to the millivolt the ADC reports: ``11.384 V``."""
    return MISSING if value is None else f"{value:.3f} V"


def temp(celsius: float | None) -> str:
    """``42 °C``."""
    return MISSING if celsius is None else f"{celsius:.0f} °C"


def temp_at_limit(celsius: float | None, limit_c: float) -> str:
    """``82 °C ≥ 81.85``: a temperature at or over the limit it is shown against."""
    return f"{temp(celsius)} ≥ {round(limit_c, 2):g}"


def mhz(value: int | None) -> str:
    """``1530``, MHz implied by the column title."""
    return MISSING if value is None else str(value)


def gbps(value: float | None) -> str:
    """``20 Gb/s``, ``2.5 Gb/s``."""
    return MISSING if value is None else f"{value:g} Gb/s"


def lanes(speed_gbps: float | None, count: int | None) -> str:
    """Speed per lane times lanes: ``2x20``; ``—`` when unknown."""
    if speed_gbps is None or count is None:
        return MISSING
    return f"{count}x{speed_gbps:g}"


def pcie(gen: int | None, width: int | None) -> str:
    """PCIe link as generation and width: ``3x16``."""
    if gen is None and width is None:
        return MISSING
    return f"{MISSING if gen is None else gen}x{MISSING if width is None else width}"


def signed(value: float | None, digits: int = 2) -> str:
    """A number with its sign: ``+0.06``; what rounds to zero is ``+0.00``, never ``-0.00``."""
    return MISSING if value is None else f"{round(value, digits) or 0.0:+.{digits}f}"
