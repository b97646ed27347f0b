"""Numeric series of a frame, found generically, and min/mean/max aggregation over buckets.

A series is one numeric field of the readings, named by its path: ``host.cpu_pct``,
``net[eth0].rx_bytes_per_s``, ``gpus[0].power_w``, ``psu[/dev/ttyACM0].volts.min_volts``.
An element of a list is named by its first field (the record's identity: ``index``,
``name``, ``sensor``, ``port``...) when that is a string or an integer, else by its position;
an AMD GPU by its PCI address (`ELEMENT_KEY_FIELDS`: ``amd_gpus[0000:c3:00.0].power_w``).
Sources added later get series without code here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import msgspec

#: Series kept per bucket: [min, sum, max, count]; the mean is sum / count.
Stats = list[float]
#: Lists of the readings whose elements are named by another field than their first, by the list's
#: name: an AMD GPU by its PCI address, not its DRM card (``card0``), which follows the drivers' probe
#: order and may be another GPU's after a reboot (its history went on as that GPU's). An element
#: without a string or integer there is named as any other.
ELEMENT_KEY_FIELDS: dict[str, str] = {"amd_gpus": "pci_bus_id"}


def iter_numeric(data: Any, prefix: str = "") -> Iterator[tuple[str, float]]:
    """Yield ``(series name, value)`` for every number in JSON-shaped readings data.

    Booleans and ``*_at`` timestamps are not series; ``None`` (missing) yields nothing.
    """
    if isinstance(data, Mapping):
        for key, value in data.items():
            if key.endswith("_at"):
                continue
            yield from iter_numeric(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(data, (list, tuple)):
        key = ELEMENT_KEY_FIELDS.get(prefix)
        for position, item in enumerate(data):
            yield from iter_numeric(item, f"{prefix}[{_element_key(item, position, key)}]")
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        value = float(data)
        if math.isfinite(value):
            yield prefix, value


def _element_key(item: Any, position: int, key: str | None = None) -> str:
    if isinstance(item, Mapping) and item:
        if key is not None:
            named = item.get(key)
            if isinstance(named, (str, int)) and not isinstance(named, bool):
                return str(named)
        first = next(iter(item.values()))
        if isinstance(first, (str, int)) and not isinstance(first, bool):
            return str(first)
    return str(position)


def frame_series(frame_data: Mapping[str, Any]) -> dict[str, float]:
    """Every numeric series of one frame (JSON data of a `schema.Frame`): ``dict(iter_numeric(readings))``."""
    out: dict[str, float] = {}
    _series_into(frame_data.get("readings") or {}, "", out)
    return out


def _series_into(data: Any, prefix: str, out: dict[str, float]) -> None:
    """`iter_numeric`'s walk written into ``out`` by plain recursion.

    A frame holds about a thousand numbers five levels deep: generators nested that deep
    (``yield from`` at each level) cost the journal's downsampling about 0.8 ms a frame.
    Strings, ``None`` and booleans, most of the leaves, are passed over without a call.
    """
    if isinstance(data, Mapping):
        for key, value in data.items():
            kind = type(value)
            if kind is str or value is None or kind is bool or key.endswith("_at"):
                continue
            name = f"{prefix}.{key}" if prefix else str(key)
            if kind is float or kind is int:
                if value - value == 0:  # finite: inf - inf and nan - nan are nan
                    out[name] = float(value)
            else:
                _series_into(value, name, out)
    elif isinstance(data, (list, tuple)):
        key = ELEMENT_KEY_FIELDS.get(prefix)
        for position, item in enumerate(data):
            _series_into(item, f"{prefix}[{_element_key(item, position, key)}]", out)
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        value = float(data)
        if math.isfinite(value):
            out[prefix] = value


def add_value(stats: dict[str, Stats], name: str, value: float) -> None:
    """Fold one sample into a bucket's statistics."""
    s = stats.get(name)
    if s is None:
        stats[name] = [value, value, value, 1.0]
    else:
        if value < s[0]:
            s[0] = value
        if value > s[2]:
            s[2] = value
        s[1] += value
        s[3] += 1.0


def merge_stats(into: dict[str, Stats], other: Mapping[str, Stats]) -> None:
    """Fold a finer bucket's statistics into a coarser one (min of mins, max of maxes)."""
    for name, s in other.items():
        mine = into.get(name)
        if mine is None:
            into[name] = list(s)
        else:
            mine[0] = min(mine[0], s[0])
            mine[2] = max(mine[2], s[2])
            mine[1] += s[1]
            mine[3] += s[3]


class Point(msgspec.Struct, frozen=True, gc=False):
    """One point of a series: a bucket (or a single frame) starting at ``at``."""

    at: float
    min: float
    mean: float
    max: float


def to_points(buckets: Iterable[tuple[float, Mapping[str, Stats]]],
              names: set[str] | None = None) -> dict[str, list[Point]]:
    """Turn time-ordered buckets into per-series point lists, optionally only ``names``."""
    out: dict[str, list[Point]] = {}
    for at, stats in buckets:
        for name, (lo, total, hi, count) in stats.items():
            if names is not None and name not in names:
                continue
            out.setdefault(name, []).append(Point(at, lo, total / count if count else lo, hi))
    return out


def series_by_suffix(names: Iterable[str], suffix: str) -> list[str]:
    """Sorted series names ending in ``suffix`` (``_volts``, ``_w``, ``_bytes_per_s``)."""
    return sorted(n for n in names if n.endswith(suffix))
