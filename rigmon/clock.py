"""Clock seam: wall and monotonic time, real on a node, simulated in the simulator and tests."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Source of time for collectors and the sampler."""

    def time(self) -> float:
        """Wall-clock Unix seconds."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""
        ...


def clock_speed(clock: Clock) -> float:
    """Seconds of ``clock`` that pass in a real second: 1 for the machine's clocks, a simulated clock's
    ``speed`` (`rigmon.sim.clock.SimClock`: ``rigmon demo --speed 30``).

    The agent ticks on real time (its event loop) and stamps its frames on ``clock``: frames
    ``interval_s`` real seconds apart are ``interval_s * clock_speed`` apart on their own clock,
    which is the interval it reports.
    """
    speed = getattr(clock, "speed", 1.0)
    return float(speed) if isinstance(speed, (int, float)) and speed > 0 else 1.0


class SystemClock:
    """The machine's clocks."""

    #: Real seconds per real second.
    speed = 1.0

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()
