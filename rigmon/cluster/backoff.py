"""Exponential back-off between retries of a request to an agent."""

from __future__ import annotations


class Backoff:
    """Exponential delays between retries: ``initial_s``, doubling, capped at ``max_s``."""

    def __init__(self, initial_s: float = 0.5, max_s: float = 15.0) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self._next_s = initial_s

    def next(self) -> float:
        """The delay before the next retry (then double it)."""
        delay = self._next_s
        self._next_s = min(self.max_s, self._next_s * 2)
        return delay

    def reset(self) -> None:
        """Data arrived: start from ``initial_s`` again."""
        self._next_s = self.initial_s

