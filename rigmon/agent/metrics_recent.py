"""The highest value of each item over the last span of frames, for series a scrape every few seconds must not thin.

The agent makes a frame a second; Prometheus scrapes every few (`deploy/prometheus/prometheus.yml`: 5 s) and
sees one frame of each scrape's span. A GPU's power peak between two polls (incident 1: peaks far above the
power limit at every DDP ramp) in one of the frames between two scrapes would never reach Prometheus;
`RecentHighest` keeps it for the span, as `rigmon_psu_rail_lowest_volts` keeps the rail's minimum.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class RecentHighest(Generic[K]):
    """The highest value seen for each key over the last ``span_s`` seconds of frame time."""

    def __init__(self, span_s: float) -> None:
        self.span_s = span_s
        self._values: dict[K, deque[tuple[float, float]]] = {}

    def add(self, key: K, at: float, value: float) -> None:
        """One value of ``key`` at frame time ``at`` (Unix seconds)."""
        values = self._values.setdefault(key, deque())
        # A value below a later one can never be the highest again: keep the falling sequence only.
        while values and values[-1][1] <= value:
            values.pop()
        values.append((at, value))

    def keep_only(self, keys: Iterable[K]) -> None:
        """Forget the keys not in ``keys`` (a GPU gone from the frame takes its series with it)."""
        wanted = set(keys)
        for key in [k for k in self._values if k not in wanted]:
            del self._values[key]

    def highest(self, now: float) -> dict[K, float]:
        """Each key's highest value over the span ending at frame time ``now``."""
        out = {}
        for key, values in self._values.items():
            while values and values[0][0] < now - self.span_s:
                values.popleft()
            if values:
                out[key] = values[0][1]
        return out
