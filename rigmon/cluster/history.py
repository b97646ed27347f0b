"""Bounded per-node history of a few key figures, and min/max-preserving downsampling for drawing."""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence
from typing import Literal

Extreme = Literal["min", "max"]

#: Points kept per node: an hour at one frame per second.
HISTORY_POINTS = 3600


class Ring:
    """A fixed-capacity ring of floats (``nan`` stands for a missing value).

    Backed by an ``array`` so an hour of several series for 64 nodes stays a few MB.
    """

    def __init__(self, capacity: int, typecode: Literal["d", "f"] = "d") -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        # "f" (4-byte floats) for series whose figures need no more (temperatures): half the memory.
        self._data = array(typecode)
        self._start = 0

    def __len__(self) -> int:
        return len(self._data)

    def append(self, value: float) -> None:
        """Add the newest value, dropping the oldest when full."""
        if len(self._data) < self.capacity:
            self._data.append(value)
        else:
            self._data[self._start] = value
            self._start = (self._start + 1) % self.capacity

    def tail(self, count: int | None = None) -> list[float]:
        """The newest ``count`` values (all when ``None``), oldest first."""
        size = len(self._data)
        if count is None or count >= size:
            return (self._data[self._start:] + self._data[: self._start]).tolist()
        if count <= 0:
            return []
        # Copy only the values asked for (a row's trend wants 120 of an hour's 3600).
        first = (self._start + size - count) % size
        if first < self._start or self._start == 0:
            return self._data[first : first + count].tolist()
        return (self._data[first:] + self._data[: self._start]).tolist()


def downsample(values: Sequence[float], buckets: int, extreme: Extreme) -> list[float]:
    """Reduce ``values`` to at most ``buckets`` points, keeping each bucket's minimum or maximum.

    A voltage trend keeps minima (a sag must survive), a power trend maxima (a peak must
    survive). Missing values (``nan``) are skipped; a bucket with nothing in it is dropped.

    Args:
        values: oldest first.
        buckets: most points wanted (at least 1).
        extreme: which extreme each bucket keeps.

    Returns:
        The reduced series, oldest first.
    """
    if buckets < 1:
        raise ValueError("buckets must be at least 1")
    pick = min if extreme == "min" else max
    size = len(values)
    if size <= buckets:
        return [v for v in values if not math.isnan(v)]
    out: list[float] = []
    for index in range(buckets):
        chunk = values[index * size // buckets : (index + 1) * size // buckets]
        # A NaN after the first value never wins a comparison, so min/max skip it; only a
        # NaN in first place would be returned: then the bucket is filtered (rare).
        best = pick(chunk)
        if math.isnan(best):
            present = [v for v in chunk if not math.isnan(v)]
            if not present:
                continue
            best = pick(present)
        out.append(best)
    return out


def shares(lengths: Sequence[int], total: int) -> list[int]:
    """``total`` points (or bars) shared between parts of ``lengths`` values in proportion: each
    part at least one and at most its length (largest remainders). Needs ``total >= len(lengths)``.
    """
    whole = sum(lengths)
    if whole <= total:
        return list(lengths)
    ideal = [total * n / whole for n in lengths]
    out = [min(n, max(1, int(x))) for n, x in zip(lengths, ideal)]
    while sum(out) > total:  # the minimum of one each gave too many: from those given most over
        j = max((i for i in range(len(out)) if out[i] > 1), key=lambda i: out[i] - ideal[i])
        out[j] -= 1
    while sum(out) < total:
        j = max((i for i in range(len(out)) if out[i] < lengths[i]), key=lambda i: ideal[i] - out[i])
        out[j] += 1
    return out


#: Frames further apart than this many times their usual spacing (`usual_spacing`) have frames
#: missing between them, however long the agent's interval says its frames should be apart.
GAP_SPACINGS = 3.0


def usual_spacing(steps: Sequence[float]) -> float:
    """The usual time between two frames (s) of ``steps``: their lower quartile, which neither the
    gaps (up to three in four steps) nor frames pushed between ticks (an ADC sag) move much; 0 without steps."""
    if not steps:
        return 0.0
    return sorted(steps)[len(steps) // 4]


def gap_cuts(times: Sequence[float], gap_s: float) -> list[int]:
    """Indices of the points of ``times`` that follow the one before by more than ``gap_s``
    seconds and more than `GAP_SPACINGS` of their `usual_spacing`: frames are missing before them
    (the node was down, or silent). A node whose frames come further apart on its clock than its
    interval says (a simulated rig at ``--speed 30`` samples every real second, 30 s apart on the
    simulated clock) is not cut between every two frames."""
    steps = [at - before for before, at in zip(times, times[1:])]
    limit = max(gap_s, GAP_SPACINGS * usual_spacing(steps))
    return [i for i, step in enumerate(steps, 1) if step > limit]


def downsample_gapped(values: Sequence[float], cuts: Sequence[int], buckets: int, extreme: Extreme) -> list[float]:
    """`downsample`, with a ``nan`` point at each of ``cuts`` (`gap_cuts`). Each stretch between
    gaps is reduced on its own (buckets shared in proportion), so a gap is not swallowed by a
    bucket, and no bucket joins both sides. Without cuts (or with more than buckets) it is
    `downsample`. Missing values are dropped as there, so a ``nan`` in the result always stands
    for a gap.
    """
    if not cuts or len(cuts) >= buckets:
        return downsample(values, buckets, extreme)
    bounds = [0, *cuts, len(values)]
    parts = [values[a:b] for a, b in zip(bounds, bounds[1:])]
    out: list[float] = []
    for part, count in zip(parts, shares([len(p) for p in parts], buckets)):
        reduced = downsample(part, count, extreme)
        if out and reduced:
            out.append(math.nan)
        out += reduced
    return out


#: Series a `NodeHistory` keeps, with the extreme that must survive downsampling.
SERIES: dict[str, Extreme] = {
    "rail_min_volts": "min",
    "gpu_power_w": "max",
    "cpu_pct": "max",
    "net_bytes_per_s": "max",
    "storage_bytes_per_s": "max",
}


#: Per-device series (see `rigmon.summary.detail_values`) one node keeps at most;
#: a node listing more devices gets trends for the first ones only.
MAX_DETAIL_SERIES = 64


#: Temperature series (`rigmon.cluster.temperature_charts.held_temperatures`: what the history's
#: temperature charts draw) one node keeps at most, as 4-byte floats.
MAX_TEMPERATURE_SERIES = 32
#: Decimals of a temperature read back from its 4-byte float: hwmon and thermal zones give millidegrees.
TEMPERATURE_DECIMALS = 3


def detail_extreme(name: str) -> Extreme:
    """The extreme a per-device series keeps when downsampled: voltages (``*_volts``) their
    minimum, so a sag survives; everything else its maximum, so a peak survives."""
    return "min" if name.endswith("_volts") else "max"


class NodeHistory:
    """The last ``capacity`` frames of one node, reduced to the series in `SERIES` plus
    per-device series (``details``) named by the frames, and the temperature series the history
    view's charts draw (``temperatures``, named as the agent's ``/v1/history`` names them), so that
    they can be charted from what the dashboard holds when the agent cannot answer.

    Points are appended in arrival order; `seqs` lets a reader check
    that a resumed stream left no hole. Every series has one point per frame (``nan``
    where the frame lacked it), so series line up.
    """

    def __init__(self, capacity: int = HISTORY_POINTS, max_details: int = MAX_DETAIL_SERIES) -> None:
        self.capacity = capacity
        self.max_details = max_details
        # Seqs are whole numbers far below 2**53, exact as floats.
        self._seqs = Ring(capacity)
        self.taken_at = Ring(capacity)
        self.series = {name: Ring(capacity) for name in SERIES}
        self.details: dict[str, Ring] = {}
        self.temperatures: dict[str, Ring] = {}

    def __len__(self) -> int:
        return len(self._seqs)

    def seqs(self) -> list[int]:
        """Seq of every point, oldest first."""
        return [int(s) for s in self._seqs.tail()]

    def append(self, seq: int, taken_at: float, values: Mapping[str, float | None],
               details: Mapping[str, float | None] | None = None,
               temperatures: Mapping[str, float] | None = None) -> None:
        """Add one frame's values, per-device values and temperatures (missing ones become ``nan``).

        A per-device or temperature series seen for the first time starts with ``nan`` for the frames
        before; past `max_details` (`MAX_TEMPERATURE_SERIES`) new ones are not kept.
        """
        details = details or {}
        for name in details:
            if name not in self.details and len(self.details) < self.max_details:
                self.details[name] = self._new_ring("d")
        for name in temperatures or ():
            if name not in self.temperatures and len(self.temperatures) < MAX_TEMPERATURE_SERIES:
                self.temperatures[name] = self._new_ring("f")
        if self.temperatures:
            held = temperatures or {}
            for name, ring in self.temperatures.items():
                ring.append(held.get(name, math.nan))
        self._seqs.append(seq)
        self.taken_at.append(taken_at)
        for name, ring in self.series.items():
            value = values.get(name)
            ring.append(math.nan if value is None else value)
        for name, ring in self.details.items():
            value = details.get(name)
            ring.append(math.nan if value is None else value)

    def _new_ring(self, typecode: Literal["d", "f"]) -> Ring:
        """A ring for a series first seen now: ``nan`` for the frames held before."""
        ring = Ring(self.capacity, typecode)
        for _ in range(len(self._seqs)):
            ring.append(math.nan)
        return ring

    def values(self, name: str) -> list[float]:
        """Every value held of series ``name`` (one of `SERIES`, a per-device series or a temperature
        series), oldest first as `times` (``nan`` where a frame lacked it); empty for a series not held."""
        ring = self.series.get(name) or self.details.get(name)
        if ring is None and name in self.temperatures:
            # Kept as 4-byte floats; read as the millidegrees the kernel gives (61.618, not 61.61800003).
            return [round(v, TEMPERATURE_DECIMALS) for v in self.temperatures[name].tail()]
        return ring.tail() if ring is not None else []

    def times(self) -> list[float]:
        """``taken_at`` of every frame held (Unix s, the node's clock), in arrival order."""
        return self.taken_at.tail()

    def span_s(self, points: int | None) -> float | None:
        """Seconds from the oldest to the newest of the newest ``points`` frames (all when
        ``None``): the span their trends cover; ``None`` before two frames."""
        times = self.taken_at.tail(points)
        if len(times) < 2:
            return None
        # Frames fetched from the journal after a gap arrive late: not in time order.
        return max(times) - min(times)

    def gaps(self, points: int | None, gap_s: float) -> list[int]:
        """`gap_cuts` of the newest ``points`` frames (all when ``None``), for `trend`."""
        return gap_cuts(self.taken_at.tail(points), gap_s)

    def trend(self, name: str, points: int | None, buckets: int, cuts: Sequence[int] = ()) -> tuple[float, ...]:
        """The newest ``points`` values of a series (all when ``None``) downsampled to ``buckets``,
        with a ``nan`` at each gap of ``cuts`` (`gaps` of the same points; `downsample_gapped`)."""
        return tuple(downsample_gapped(self.series[name].tail(points), cuts, buckets, SERIES[name]))

    def detail_trends(self, points: int | None, buckets: int, cuts: Sequence[int] = ()) -> dict[str, tuple[float, ...]]:
        """Every per-device series, like `trend`, each keeping its `detail_extreme`."""
        return {name: tuple(downsample_gapped(ring.tail(points), cuts, buckets, detail_extreme(name)))
                for name, ring in self.details.items()}
