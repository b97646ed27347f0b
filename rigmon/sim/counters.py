"""Traffic counters carried on from the physics grid to the time a tree is written for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass
class CarriedCounters:
    """Counters that run continuously on real hardware (bytes, packets), written between physics steps.

    Physics advance on a 0.1 s grid, but a real kernel's counters move with every packet:
    written as they stand at the grid, a reader 1 s apart sees 9, 10 or 11 steps of traffic
    (rates jumping +-10 % frame to frame). So each counter goes on at the last step's pace up
    to the time the tree is written for (`SimNode.write_t_s`), and never below what was written
    before (traffic that stops leaves it standing). Event counters (link downed) are not for
    this: they would be counted again.

    Call `step` with the counters as they stand before each physics step, and `at` as they are
    written.
    """

    _step: tuple[float, float] = (0.0, 0.0)
    """Simulated time and length of the last physics step."""
    _before: dict[str, list[float]] = field(default_factory=dict)
    """Each key's counters before the last physics step."""
    _shown: dict[str, list[int]] = field(default_factory=dict)
    """The counters last written, which the next write never goes below."""

    def step(self, t_s: float, dt_s: float, before: Mapping[str, Sequence[float]]) -> None:
        """Record the counters of every key as they stand before the physics step to ``t_s`` (``dt_s`` long)."""
        self._step = (t_s, dt_s)
        self._before = {key: list(values) for key, values in before.items()}

    def at(self, key: str, now: Sequence[float], write_t_s: float) -> list[int]:
        """``now`` (the counters of ``key`` at the last grid point) carried on to ``write_t_s``, as integers."""
        t_s, dt_s = self._step
        lead_s = write_t_s - t_s
        before = self._before.get(key)
        out = [int(v) for v in now]
        if before is not None and len(before) == len(now) and dt_s > 0 and lead_s > 0:
            share = min(1.0, lead_s / dt_s)
            out = [int(v + max(0.0, (v - b) * share)) for v, b in zip(now, before)]
        shown = self._shown.get(key)
        if shown is not None and len(shown) == len(out):
            out = [max(v, s) for v, s in zip(out, shown)]
        self._shown[key] = out
        return out

    def forget(self, key: str) -> None:
        """Forget ``key``'s counters: a device gone, whose counters start again from zero when it is back."""
        self._before.pop(key, None)
        self._shown.pop(key, None)
