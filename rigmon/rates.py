"""Counter-to-rate conversion that survives counter wrap and reset."""

from __future__ import annotations

from collections.abc import Hashable


def counter_delta(previous: int, current: int, width_bits: int | None) -> int | None:
    """Increase of a counter between two reads.

    Args:
        previous: earlier raw value.
        current: later raw value.
        width_bits: the counter's width when the kernel keeps it in a fixed-size integer
            that wraps (32 for some NIC drivers); ``None`` for 64-bit counters, where a
            decrease can only mean a reset.

    Returns:
        The increase, or ``None`` when the counter was reset (device re-created, driver
        reloaded) and no honest delta exists.
    """
    if current >= previous:
        return current - previous
    if width_bits is not None and previous < 2**width_bits:
        wrapped: int = current + 2**width_bits - previous
        # A genuine wrap leaves a small delta; a reset to near zero from a low value would
        # look like an enormous one. Accept a wrap only when it is under half the range.
        if wrapped < 2 ** (width_bits - 1):
            return wrapped
    return None


class CounterRates:
    """Per-key rates from successive counter reads on a monotonic clock."""

    def __init__(self) -> None:
        self._last: dict[Hashable, tuple[float, int]] = {}

    def rate(self, key: Hashable, value: int, now_s: float, width_bits: int | None = None) -> float | None:
        """Record ``value`` for ``key`` at ``now_s`` and return the rate per second since the last read.

        ``None`` on the first read of a key, after a reset, or when no time has passed.
        """
        last = self._last.get(key)
        self._last[key] = (now_s, value)
        if last is None:
            return None
        then_s, previous = last
        elapsed = now_s - then_s
        if elapsed <= 0:
            return None
        delta = counter_delta(previous, value, width_bits)
        return None if delta is None else delta / elapsed

    def forget_missing(self, present: set[Hashable]) -> None:
        """Drop state for keys no longer seen (an interface or disk that went away)."""
        for key in list(self._last):
            if key not in present:
                del self._last[key]
