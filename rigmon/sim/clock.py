"""SimClock: simulated time that can run faster than real time."""

from __future__ import annotations

import time


class SimClock:
    """A clock that starts at the real time and runs ``speed`` times faster.

    Both `time` and `monotonic` advance at the same simulated pace, so rates computed by
    collectors against it match the counters the simulator writes.
    """

    def __init__(self, speed: float = 1.0, start_at: float | None = None) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        self._wall0 = time.time() if start_at is None else start_at
        self._mono0 = time.monotonic()

    def elapsed(self) -> float:
        """Simulated seconds since the clock started."""
        return (time.monotonic() - self._mono0) * self.speed

    def time(self) -> float:
        return self._wall0 + self.elapsed()

    def monotonic(self) -> float:
        return self.elapsed()
