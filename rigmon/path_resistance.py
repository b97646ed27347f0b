"""Estimate the resistance of a supply path (PSU to GPU terminals) in milliohms, with its trend.

Pure: no I/O and no clock; callers pass the time of each point. Two methods:

* ``two_point``: a PSU-side and a load-side voltage and the current through the path. Two
  ADC channels disagree by a few millivolts at zero current (two INA226s, an ADS1115 pair),
  which through the origin would read 12-19 % high at idle: the drop is fitted as
  ``drop = a + R * I`` when the current varies (``MIN_SPREAD_AMPS``), and otherwise as
  ``drop - a = R * I`` with the offset ``a`` learned from the latest days whose current
  varied; with no such day yet there is no estimate rather than a biased one.
* ``load_steps``: only the load-side voltage and the current (or total GPU power) are
  known. Across load steps the rail follows ``V = V0 - R * I``; the slope gives R. This
  includes the PSU's own droop, needs the current to change (``current_span_amps``) and
  is reported as unknown when it does not.

Each day's points are also fitted on their own; the slope of those daily estimates is the
trend that makes a connection corroding over weeks visible. The daily fits are what an agent
restart must not lose: `EstimatorState` holds them, and collectors that own estimators
implement `PathStateHolder` so the agent can save and restore them.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import msgspec

from rigmon.schema import PathResistanceReading, ResistanceMethod

DAY_S = 86400.0
MILLI = 1000.0
#: Points below this current say nothing about the path: the drop is within the noise.
MIN_CURRENT_AMPS = 1.0
#: A load-steps fit needs at least this spread of current to be meaningful.
MIN_SPAN_AMPS = 5.0
#: ``two_point``: a standard deviation of the current from which the points fit a line of their
#: own and teach the channels' offset. Not the span: one transient at idle makes a span, and a
#: line through it is that one point's noise.
MIN_SPREAD_AMPS = 5.0
#: Points that stay behind the current estimate however old they are.
MIN_RECENT_POINTS = 10
#: Days of daily estimates kept for the trend.
TREND_DAYS_KEPT = 120
#: ``two_point``: the latest days with current spread that the channels' offset is learned from.
OFFSET_DAYS = 14
#: Points behind the current estimate at most: the 15 minutes of `recent_s` at up to 18 ADC windows
#: a second (a 10/s rail ADC adds 9000); a faster device's estimate covers fewer minutes.
RECENT_POINTS = 16_384


class _Fit(msgspec.Struct):
    """Running sums for a least-squares line (or a line through a known intercept)."""

    n: int = 0
    sx: float = 0.0
    sy: float = 0.0
    sxx: float = 0.0
    sxy: float = 0.0
    syy: float = 0.0
    x_min: float = math.inf
    x_max: float = -math.inf

    def add(self, x: float, y: float) -> None:
        self.add_moments(x, y)
        self.x_min = min(self.x_min, x)
        self.x_max = max(self.x_max, x)

    def add_moments(self, x: float, y: float) -> None:
        """Add a point to the sums only (``x_min``/``x_max`` are left as they are, as `remove` does)."""
        self.n += 1
        self.sx += x
        self.sy += y
        self.sxx += x * x
        self.sxy += x * y
        self.syy += y * y

    def remove(self, x: float, y: float) -> None:
        """Take a point out of the sums (``x_min``/``x_max`` are left as they are)."""
        self.n -= 1
        self.sx -= x
        self.sy -= y
        self.sxx -= x * x
        self.sxy -= x * y
        self.syy -= y * y

    def through_point(self, a: float) -> tuple[float, float] | None:
        """Slope of y = a + k x for a known ``a`` and its standard error, or None with too few points."""
        if self.n < 2 or self.sxx <= 0:
            return None
        sxy = self.sxy - a * self.sx
        k = sxy / self.sxx
        syy = self.syy - 2 * a * self.sy + a * a * self.n
        residual = max(0.0, syy - 2 * k * sxy + k * k * self.sxx)
        return k, math.sqrt(residual / (self.n - 1) / self.sxx)

    def line(self) -> tuple[float, float] | None:
        """Slope of y = a + k x and its standard error, or None when x does not vary."""
        if self.n < 3:
            return None
        sxx_c = self.sxx - self.sx * self.sx / self.n
        if sxx_c <= 1e-12:
            return None
        sxy_c = self.sxy - self.sx * self.sy / self.n
        syy_c = self.syy - self.sy * self.sy / self.n
        k = sxy_c / sxx_c
        residual = max(0.0, syy_c - k * sxy_c)
        return k, math.sqrt(residual / (self.n - 2) / sxx_c)

    @property
    def span(self) -> float:
        return self.x_max - self.x_min if self.n else 0.0

    @property
    def spread(self) -> float:
        """Standard deviation of x (0 without points)."""
        return math.sqrt(max(0.0, self.sxx - self.sx * self.sx / self.n) / self.n) if self.n else 0.0


# A frozen msgspec Struct, not a dataclass (cheaper to define at the agent's start); gc=False:
# frozen, holding only plain values and frozen records, it cannot be part of a reference cycle.
class DayFitState(msgspec.Struct, frozen=True, gc=False):
    """The running sums of one day's points (x: amps, y: volts as fitted), for a restart."""

    day: int
    """Days since the Unix epoch (``floor(at / 86400)``)."""
    n: int
    sx: float
    sy: float
    sxx: float
    sxy: float
    syy: float
    x_min: float
    x_max: float


class EstimatorState(msgspec.Struct, frozen=True, gc=False):
    """What a `PathResistanceEstimator` keeps across an agent restart: its daily fits.

    The recent points behind the current estimate (minutes) are not kept: fresh ones
    replace them. ``first_day`` is the day of the first point ever, moved on past days that
    left the days kept without an estimate (they held no baseline). The fields with defaults
    came later: a state saved by an older agent loads without them.
    """

    path: str
    method: ResistanceMethod
    first_day: int | None
    days: tuple[DayFitState, ...]
    offset_volts: float | None = None
    """``two_point``: the channels' offset (drop at zero current) last learned, for when no kept
    day has current spread."""
    baseline_day: int | None = None
    """The day of the first daily estimate, once that day's sums have left the days kept."""
    baseline_mohm: float | None = None
    """That day's estimate (with ``baseline_day``)."""


@runtime_checkable
class PathStateHolder(Protocol):
    """A collector that owns path-resistance estimators whose trend must survive a restart.

    Both methods may be called from another thread than the one feeding the estimators.
    """

    def export_path_state(self) -> tuple[EstimatorState, ...]:
        """The daily fits of every estimator."""
        ...

    def restore_path_state(self, states: Sequence[EstimatorState]) -> int:
        """Take over saved daily fits (before or after the first points); return how many estimators matched."""
        ...


class PathResistanceEstimator:
    """Path resistance from voltage/current points, recent and as a daily trend.

    Args:
        path: name of the path (``vpsu-v``, ``rail``), reported as is.
        method: ``two_point`` (feed `add_drop`) or ``load_steps`` (feed `add_load_point`
            or `add_power_point`).
        recent_s: seconds of points behind the current estimate (older ones only count in
            their day's estimate for the trend).
        recent_points: at most this many points behind the current estimate.
    """

    def __init__(self, path: str, method: ResistanceMethod, recent_s: float = 900.0,
                 recent_points: int = RECENT_POINTS) -> None:
        self.path = path
        self.method: ResistanceMethod = method
        self.recent_s = recent_s
        self.recent_points = recent_points
        # The recent points (at, amps, y) and their fit kept up to date as points come and go,
        # so that a reading does not refit thousands of points (a rail ADC adds ten a second):
        # the sums in `_sums`, the lowest and highest current in monotonic queues of
        # (point number, amps). Subtracting leaves rounding behind: the sums are made afresh
        # once as many points have left as remain.
        self._recent: deque[tuple[float, float, float]] = deque()
        self._sums = _Fit()
        self._lows: deque[tuple[int, float]] = deque()
        self._highs: deque[tuple[int, float]] = deque()
        self._added = 0
        self._removed = 0
        self._days: dict[int, _Fit] = {}
        self._first_day: int | None = None
        # The last offset learned (two_point) and the first day's estimate (day, ohms) once
        # its sums are dropped: both outlive the days they came from.
        self._offset_volts: float | None = None
        self._baseline: tuple[int, float] | None = None

    def add_drop(self, drop_volts: float, amps: float, at: float) -> None:
        """Add a ``two_point`` observation: PSU-side minus load-side volts at ``amps``, time ``at``."""
        if amps >= MIN_CURRENT_AMPS and math.isfinite(drop_volts):
            self._add(amps, drop_volts, at)

    def add_load_point(self, load_volts: float, amps: float, at: float) -> None:
        """Add a ``load_steps`` observation: load-side volts at total current ``amps``."""
        if amps >= 0 and math.isfinite(load_volts):
            # V = V0 - R I: fit -V against I so the slope is R.
            self._add(amps, -load_volts, at)

    def add_power_point(self, load_volts: float, power_w: float, at: float) -> None:
        """Add a ``load_steps`` observation from total GPU board power (another collector).

        The current is taken as ``power_w / load_volts``; loads that are not GPUs (fans,
        CPU, drives on the same rail) are left out, which makes the estimate a little low.
        """
        if load_volts > 0 and power_w >= 0:
            self.add_load_point(load_volts, power_w / load_volts, at)

    def _add(self, amps: float, y: float, at: float) -> None:
        recent = self._recent
        recent.append((at, amps, y))
        sums = self._sums
        sums.add_moments(amps, y)
        number = self._added
        self._added += 1
        lows, highs = self._lows, self._highs
        while lows and lows[-1][1] >= amps:
            lows.pop()
        lows.append((number, amps))
        while highs and highs[-1][1] <= amps:
            highs.pop()
        highs.append((number, amps))
        # Old points leave the estimate, but a few always stay so that a slowly reporting
        # source (or an accelerated simulation) still gets one.
        while len(recent) > self.recent_points or (len(recent) > MIN_RECENT_POINTS and recent[0][0] < at - self.recent_s):
            _, old_amps, old_y = recent.popleft()
            sums.remove(old_amps, old_y)
            self._removed += 1
        first = self._added - len(recent)
        while lows[0][0] < first:
            lows.popleft()
        while highs[0][0] < first:
            highs.popleft()
        if self._removed >= len(recent):
            self._sums = _Fit()
            for _, old_amps, old_y in recent:
                self._sums.add(old_amps, old_y)
            self._removed = 0
        day = int(at // DAY_S)
        if self._first_day is None:
            self._first_day = day
        fit = self._days.get(day)
        if fit is None:
            # Not setdefault: that builds a _Fit for every point (ten a second from a rail ADC).
            fit = self._days[day] = _Fit()
        fit.add(amps, y)
        if len(self._days) > TREND_DAYS_KEPT:
            self._prune()

    def _prune(self) -> None:
        """Drop the oldest days beyond `TREND_DAYS_KEPT`, keeping the offset and baseline they held."""
        while len(self._days) > TREND_DAYS_KEPT:
            day = min(self._days)
            offset = self._offset()
            if self._baseline is None:
                # Every earlier day with an estimate froze the baseline as it left: this is the first.
                first = self._estimate(self._days[day], offset)
                if first is not None:
                    self._baseline = (day, first[0])
            del self._days[day]
            if self._baseline is None and self._first_day is not None and self._days:
                self._first_day = max(self._first_day, min(self._days))

    def export_state(self) -> EstimatorState:
        """The daily fits, for `restore_state` after a restart."""
        days = tuple(DayFitState(day=day, n=f.n, sx=f.sx, sy=f.sy, sxx=f.sxx, sxy=f.sxy, syy=f.syy,
                                 x_min=f.x_min, x_max=f.x_max)
                     for day, f in sorted(self._days.items()) if f.n > 0)
        baseline = self._baseline
        return EstimatorState(path=self.path, method=self.method, first_day=self._first_day, days=days,
                              offset_volts=self._offset(),
                              baseline_day=None if baseline is None else baseline[0],
                              baseline_mohm=None if baseline is None else baseline[1] * MILLI)

    def restore_state(self, state: EstimatorState) -> bool:
        """Take over the daily fits of a previous run of the same path and method.

        A day this estimator already has points for adds the saved sums to its own (an agent
        restarted within the day).

        Returns:
            False, changing nothing, when the state is of another path or method.
        """
        if state.path != self.path or state.method != self.method:
            return False
        for saved in state.days:
            if saved.n <= 0 or not all(math.isfinite(v) for v in (saved.sx, saved.sy, saved.sxx, saved.sxy,
                                                                   saved.syy, saved.x_min, saved.x_max)):
                continue
            fit = self._days.setdefault(saved.day, _Fit())
            fit.n += saved.n
            fit.sx += saved.sx
            fit.sy += saved.sy
            fit.sxx += saved.sxx
            fit.sxy += saved.sxy
            fit.syy += saved.syy
            fit.x_min = min(fit.x_min, saved.x_min)
            fit.x_max = max(fit.x_max, saved.x_max)
        if self._offset_volts is None and state.offset_volts is not None and math.isfinite(state.offset_volts):
            self._offset_volts = state.offset_volts
        if (state.baseline_day is not None and state.baseline_mohm is not None and math.isfinite(state.baseline_mohm)
                and (self._baseline is None or state.baseline_day < self._baseline[0])):
            self._baseline = (state.baseline_day, state.baseline_mohm / MILLI)
        firsts = [d for d in (state.first_day, self._first_day) if d is not None]
        self._first_day = min(firsts) if firsts else None
        self._prune()
        return True

    def _offset(self) -> float | None:
        """``two_point``: the channels' offset in volts, learned from the latest days with current spread.

        One offset and a slope per day, fitted together (the path may change from day to day,
        the channels' offset hardly): ``a = sum(sy - sx sxy / sxx) / sum(n - sx^2 / sxx)``.
        With no such day kept, the offset learned last.
        """
        if self.method != "two_point":
            return None
        num = den = 0.0
        used = 0
        for day in sorted(self._days, reverse=True):
            fit = self._days[day]
            if fit.n < 3 or fit.spread < MIN_SPREAD_AMPS:
                continue
            num += fit.sy - fit.sx * fit.sxy / fit.sxx
            den += fit.n - fit.sx * fit.sx / fit.sxx
            used += 1
            if used == OFFSET_DAYS:
                break
        if den > 1e-9 and math.isfinite(num / den):
            self._offset_volts = num / den
        return self._offset_volts

    def _estimate(self, fit: _Fit, offset: float | None) -> tuple[float, float] | None:
        if self.method == "two_point":
            if fit.spread >= MIN_SPREAD_AMPS:
                line = fit.line()
                if line is not None:
                    return line
            # Its standard error leaves the offset's own out: small once days of points taught it.
            return None if offset is None else fit.through_point(offset)
        if fit.span < MIN_SPAN_AMPS:
            return None
        return fit.line()

    def reading(self) -> PathResistanceReading:
        """The current estimate, its standard error, and the trend of daily estimates."""
        sums = self._sums
        recent = _Fit(n=sums.n, sx=sums.sx, sy=sums.sy, sxx=sums.sxx, sxy=sums.sxy, syy=sums.syy,
                      x_min=self._lows[0][1] if self._lows else math.inf,
                      x_max=self._highs[0][1] if self._highs else -math.inf)
        offset = self._offset()
        estimate = self._estimate(recent, offset)
        daily = [(day, est[0]) for day, fit in sorted(self._days.items()) if (est := self._estimate(fit, offset))]
        trend: float | None = None
        if len(daily) >= 2:
            days = _Fit()
            for day, ohm in daily:
                days.add(float(day), ohm * MILLI)
            line = days.line() if len(daily) >= 3 else None
            if line is not None:
                trend = line[0]
            else:
                (d0, r0), (d1, r1) = daily[0], daily[-1]
                trend = (r1 - r0) * MILLI / (d1 - d0)
        # The first day's estimate, also once its sums have left the days kept; none when a day
        # that may have had one left without it (a state saved by an older agent).
        baseline = (self._baseline[1] if self._baseline is not None
                    else daily[0][1] if daily and (self._first_day is None or self._first_day >= min(self._days))
                    else None)
        return PathResistanceReading(
            path=self.path,
            method=self.method,
            resistance_mohm=None if estimate is None else round(estimate[0] * MILLI, 4),
            uncertainty_mohm=None if estimate is None else round(estimate[1] * MILLI, 4),
            points=recent.n,
            current_span_amps=round(recent.span, 3) if recent.n else None,
            trend_mohm_per_day=None if trend is None else round(trend, 5),
            trend_days=float(daily[-1][0] - daily[0][0]) if daily else 0.0,
            baseline_mohm=None if baseline is None else round(baseline * MILLI, 4),
        )


class EstimatorSet:
    """Estimators by path, created on first use; saved states wait for their path to appear.

    A collector creates an estimator when the first point of a path arrives; a state
    restored before that is applied then.
    """

    def __init__(self) -> None:
        self._by_path: dict[str, PathResistanceEstimator] = {}
        self._waiting: dict[str, EstimatorState] = {}

    def get(self, path: str, method: ResistanceMethod) -> PathResistanceEstimator:
        """The estimator of ``path``, created (and given its saved state, if any) on first use."""
        est = self._by_path.get(path)
        if est is None:
            est = self._by_path[path] = PathResistanceEstimator(path, method)
            saved = self._waiting.pop(path, None)
            if saved is not None:
                est.restore_state(saved)
        return est

    def readings(self) -> list[PathResistanceReading]:
        """The reading of every estimator, by path."""
        return [est.reading() for _, est in sorted(self._by_path.items())]

    def export_state(self) -> tuple[EstimatorState, ...]:
        """Daily fits of every estimator, and saved ones whose path has not come back yet."""
        return tuple(est.export_state() for _, est in sorted(self._by_path.items())) + tuple(self._waiting.values())

    def restore_state(self, states: Sequence[EstimatorState]) -> int:
        """Apply saved states now, or when their path first appears; return how many were taken."""
        taken = 0
        for state in states:
            est = self._by_path.get(state.path)
            if est is None:
                self._waiting[state.path] = state
                taken += 1
            elif est.restore_state(state):
                taken += 1
        return taken
