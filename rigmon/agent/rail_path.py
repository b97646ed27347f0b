"""Supply path resistance from the rail voltage and the GPUs' power, when the ADC has no current channel."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from rigmon.collectors.base import NoData, PolledCollector
from rigmon.path_resistance import EstimatorSet, EstimatorState
from rigmon.schema import Frame

#: Name of the path this estimator reports (``PathResistanceReading.path``).
PATH = "rail-gpu-power"


class GpuPowerPathCollector(PolledCollector):
    """Estimates the 12 V path resistance from how the rail falls as GPU power rises.

    An ADC that measures only the load-side voltage (a common cheap build) gives no current,
    so the PSU collector cannot fit volts against amps. The GPUs' board power, from another
    collector in the same frame, stands in for the current (``I = P / V``), as issue
    "path resistance" of the PSU work allows; loads that are not GPUs are left out, which
    makes the estimate a little low. It reads the agent's newest frame, so its points lag
    the rail by one frame; both are averages over about a second, which is what a
    load-step fit needs. Its daily fits survive an agent restart (`PathStateHolder`).

    Args:
        latest: the agent's newest frame.
    """

    name = "rail_path"

    def __init__(self, latest: Callable[[], Frame | None]) -> None:
        self._latest = latest
        self._estimators = EstimatorSet()
        self._last_seq: tuple[str, int] | None = None
        # collect() runs on the sampler's worker thread; saving the state runs on the loop.
        self._lock = threading.Lock()

    def collect(self) -> Sequence[object]:
        frame = self._latest()
        if frame is None:
            raise NoData("no frame yet")
        rail = frame.readings.psu_rail
        if rail is None or rail.volts is None or not rail.connected:
            raise NoData("no rail voltage")
        if any(p.path != PATH for p in frame.readings.path_resistance):
            raise NoData("the ADC measures the path itself")
        powers = [g.power_w for g in frame.readings.gpus if g.power_w is not None]
        powers += [g.power_w for g in frame.readings.amd_gpus if g.power_w is not None]
        if not powers:
            raise NoData("no GPU power")
        with self._lock:
            estimator = self._estimators.get(PATH, "load_steps")
            if self._last_seq != (frame.run_id, frame.seq):
                self._last_seq = (frame.run_id, frame.seq)
                estimator.add_power_point(rail.volts.mean_volts, sum(powers), frame.taken_at)
            return [estimator.reading()]

    def export_path_state(self) -> tuple[EstimatorState, ...]:
        """The estimator's daily fits (`PathStateHolder`)."""
        with self._lock:
            return self._estimators.export_state()

    def restore_path_state(self, states: Sequence[EstimatorState]) -> int:
        """Take over saved daily fits of this path (`PathStateHolder`)."""
        with self._lock:
            return self._estimators.restore_state([s for s in states if s.path == PATH])
