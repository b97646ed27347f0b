"""The garbage collector's thresholds for a dashboard process."""

from __future__ import annotations

import gc

#: Allocations between runs of the garbage collector's youngest generation in the dashboard's
#: process (Python's default is 700). Each decoded frame is thousands of objects that live
#: about a second; with the default, many are promoted and full collections of the whole heap
#: (100-600 ms each with 64 nodes of 8 GPUs) come every few seconds, stopping the event loop.
GC_YOUNG_THRESHOLD = 20_000


def tune_gc() -> None:
    """Set the garbage collector for a dashboard process (call once, before the app runs)."""
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, oldest)
