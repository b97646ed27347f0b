"""Readings as the rules compare them: numbers, equality across int/float, wire-tidy numbers, slopes, identities."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from rigmon.schema import EventValue


def number(value: EventValue) -> float | None:
    """A reading as a number; ``None`` for text, booleans and non-finite values."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def same_value(a: EventValue, b: EventValue) -> bool:
    """Equality of readings across int/float (``0 == 0.0``) but not bool/number."""
    na, nb = number(a), number(b)
    if na is not None and nb is not None:
        return na == nb
    return type(a) is type(b) and a == b


def identity(labels: Mapping[str, str]) -> str | None:
    """The label that names a subject (``key``, ``index``, ``uuid``, ...); ``None`` when it has none."""
    for key in ("key", "index", "uuid", "name", "id", "sensor", "device", "path", "bus_id"):
        if key in labels:
            return labels[key]
    return None


def tidy(v: float) -> EventValue:
    """A number for the wire: integral floats become ints (``3`` replays, not ``3.0``)."""
    return int(v) if float(v).is_integer() and abs(v) < 2**53 else round(v, 6)


def slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of (t, y) points, per unit of t."""
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    return sum((t - mean_t) * (y - mean_y) for t, y in points) / var
