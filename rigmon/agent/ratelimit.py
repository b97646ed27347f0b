"""Per-client token buckets: how the agent's API bounds the request rate of each address."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable

#: Client addresses tracked at once; the least recently seen is forgotten beyond this (a
#: forgotten client starts again with a full bucket, which is harmless).
MAX_CLIENTS = 4096


class RateLimiter:
    """A token bucket per client key: ``burst`` requests at once, ``rate_per_s`` on average.

    Args:
        rate_per_s: tokens added per second; 0 disables the limit.
        burst: bucket size (requests allowed back to back).
        monotonic: clock in seconds (tests pass a fake).
        max_clients: buckets kept at once.
    """

    def __init__(self, rate_per_s: float, burst: int, monotonic: Callable[[], float] = time.monotonic,
                 max_clients: int = MAX_CLIENTS) -> None:
        if rate_per_s < 0 or burst < 1:
            raise ValueError("rate_per_s must not be negative and burst must be at least 1")
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._monotonic = monotonic
        self._max_clients = max_clients
        # key -> (tokens, monotonic time of the last update)
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    @property
    def enabled(self) -> bool:
        """Whether requests are limited at all."""
        return self.rate_per_s > 0

    def take(self, key: str) -> float | None:
        """Spend one token of ``key``'s bucket.

        Returns:
            ``None`` when the request may go ahead, else the seconds until a token is back
            (for a ``Retry-After`` header).
        """
        if not self.enabled:
            return None
        now = self._monotonic()
        tokens, last = self._buckets.pop(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - last) * self.rate_per_s)
        if tokens >= 1.0:
            self._remember(key, tokens - 1.0, now)
            return None
        self._remember(key, tokens, now)
        return (1.0 - tokens) / self.rate_per_s

    def _remember(self, key: str, tokens: float, now: float) -> None:
        self._buckets[key] = (tokens, now)
        while len(self._buckets) > self._max_clients:
            self._buckets.popitem(last=False)


def retry_after_header(wait_s: float) -> str:
    """Whole seconds for ``Retry-After`` (at least 1)."""
    return str(max(1, math.ceil(wait_s)))
