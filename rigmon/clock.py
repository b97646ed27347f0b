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


class SystemClock:
    """The machine's clocks."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()
