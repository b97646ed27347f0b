"""How the journal writer's thread waits for frames (`idle_wait_s`) and empties its queue (`drain`)."""

from __future__ import annotations

import queue
import time


def idle_wait_s(due: float, longest_s: float) -> float:
    """Seconds the writer thread may wait for a frame: until ``due`` (``time.monotonic()``), the time
    of its next own work (maintenance, or another try to open the journal), at most ``longest_s``;
    not a fixed second.

    A fixed one-second wait raced the 1 Hz frames: about every other second it ran out a
    moment before the frame came, and the thread woke twice (``benchmarks/results-loopjournal.md``).
    """
    return min(longest_s, max(0.0, due - time.monotonic()))


def drain(items: queue.Queue[object]) -> list[object]:
    """Take every item queued now out of ``items``, in their order (never blocks)."""
    out: list[object] = []
    while True:
        try:
            out.append(items.get_nowait())
        except queue.Empty:
            return out
