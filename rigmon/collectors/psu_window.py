"""Window arithmetic of the PSU rail device: the envelope of the windows since the previous frame,
and the path-resistance points they give.

Pure and unlocked, like `rigmon.collectors.psu_rail.RailState`, which owns one of each and
does the device protocol (lines, sequence numbers, reboots, counters, events) around them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from rigmon.collectors.psu_lines import RailWindow, Triple
from rigmon.config import PsuSection
from rigmon.path_resistance import EstimatorSet, PathResistanceEstimator
from rigmon.schema import CurrentEnvelope, ResistanceMethod, VoltageEnvelope

#: Path-resistance points kept before the estimators take them in unasked (they are read
#: with every frame, so this bounds memory only when nobody takes frames).
POINTS_HELD = 64


@dataclass(slots=True)
class Channel:
    """Running envelope of one channel: sample-weighted mean, min of mins, max of maxes."""

    weighted_sum: float = 0.0
    weight: float = 0.0
    low: float = math.inf
    high: float = -math.inf

    def add(self, triple: Triple, weight: float) -> None:
        self.add_values(triple.mean, triple.min, triple.max, weight)

    def add_values(self, mean: float, low: float, high: float, weight: float) -> None:
        self.weighted_sum += mean * weight
        self.weight += weight
        if low < self.low:
            self.low = low
        if high > self.high:
            self.high = high

    def mean(self) -> float:
        """The sample-weighted mean, within [low, high]."""
        mean = self.weighted_sum / self.weight if self.weight else (self.low + self.high) / 2
        # The mean of rounded means can fall a hair outside [min, max]; clamp it back.
        return min(max(round(mean, 6), self.low), self.high)

    def volts_envelope(self) -> VoltageEnvelope:
        """The channel as a voltage envelope."""
        return VoltageEnvelope(mean_volts=self.mean(), min_volts=self.low, max_volts=self.high)

    def amps_envelope(self) -> CurrentEnvelope:
        """The channel as a current envelope."""
        return CurrentEnvelope(mean_amps=self.mean(), min_amps=self.low, max_amps=self.high)


@dataclass(slots=True)
class WindowAggregate:
    """Windows since the previous frame."""

    windows: int = 0
    samples: int | None = 0
    flags: int = 0
    sag: bool = False
    volts: dict[str, Channel] = field(default_factory=dict)
    amps: dict[str, Channel] = field(default_factory=dict)

    def add(self, window: RailWindow) -> None:
        self.windows += 1
        self.flags |= window.flags
        if self.samples is not None:
            self.samples = None if window.samples is None else self.samples + window.samples
        weight = float(window.samples or 1)
        for key, triple in window.volts.items():
            self.volts.setdefault(key, Channel()).add(triple, weight)
        for key, triple in window.amps.items():
            self.amps.setdefault(key, Channel()).add(triple, weight)

    def fold(self, fast: list[float]) -> None:
        """Take in the channels of usual lines' windows accumulated in ``fast`` (see `fresh_fast`)."""
        for at, key, into in ((0, "v", self.volts), (4, "i", self.amps), (8, "vpsu", self.volts)):
            if fast[at + 2] != math.inf:
                channel = into.get(key)
                if channel is None:
                    channel = into[key] = Channel()
                channel.weighted_sum += fast[at]
                channel.weight += fast[at + 1]
                channel.low = min(channel.low, fast[at + 2])
                channel.high = max(channel.high, fast[at + 3])


def fresh_fast() -> list[float]:
    """The channels of usual RM1 lines' windows, one flat list updated in place per line.

    For ``v``, ``i`` and ``vpsu`` in turn: the sample-weighted sum of the means, the weight,
    the lowest minimum and the highest maximum (``inf``/``-inf`` while no line had the
    channel). Their window, sample and flag counts go to the `WindowAggregate` directly.
    """
    inf = math.inf
    return [0.0, 0.0, inf, -inf, 0.0, 0.0, inf, -inf, 0.0, 0.0, inf, -inf]


class PathPoints:
    """Path-resistance points of one rail device, fed to its estimators when they are read.

    Args:
        config: the ``[psu]`` section (the primary, current and PSU-side channels).
    """

    def __init__(self, config: PsuSection) -> None:
        self.config = config
        #: The path-resistance estimators (their daily fits are saved across agent restarts).
        self.estimators = EstimatorSet()
        self._estimator_of: dict[str, PathResistanceEstimator] = {}
        # Path-resistance points (load mean, current mean, PSU-side mean, wall time) not yet in
        # the estimators: they take them in when read, ten at a time instead of one per wake-up.
        self.points: list[tuple[float, float, float | None, float]] = []

    def add(self, load_mean: float, amps_mean: float, psu_mean: float | None, wall: float) -> None:
        """Keep a point (volts, amps, volts, Unix s) until the estimators are read."""
        points = self.points
        points.append((load_mean, amps_mean, psu_mean, wall))
        if len(points) >= POINTS_HELD:
            self.take()

    def take(self) -> None:
        """Feed the points kept since the estimators were last read into them, in order.

        A point with a PSU-side voltage is the drop across the path at a current; without
        one, the load-side voltage at a current (the fit across load steps).
        """
        points, self.points = self.points, []
        if not points:
            return
        primary = self.config.primary
        drop: PathResistanceEstimator | None = None
        steps: PathResistanceEstimator | None = None
        for load_mean, amps_mean, psu_mean, wall in points:
            if psu_mean is not None:
                if drop is None:
                    drop = self._estimator(f"{self.config.psu_side}-{primary}", "two_point")
                drop.add_drop(psu_mean - load_mean, amps_mean, wall)
            else:
                if steps is None:
                    steps = self._estimator(f"rail-{primary}", "load_steps")
                steps.add_load_point(load_mean, amps_mean, wall)

    def _estimator(self, path: str, method: ResistanceMethod) -> PathResistanceEstimator:
        estimator = self._estimator_of.get(path)
        if estimator is None:
            estimator = self._estimator_of[path] = self.estimators.get(path, method)
        return estimator
