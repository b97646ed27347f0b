"""The garbage collector's settings for an agent process."""

from __future__ import annotations

import gc

#: Allocations between runs of the youngest generation in an agent (Python's default is 700). A
#: tick makes a few thousand short-lived objects that reference counting frees; with the default,
#: the collector ran about three times a second on whichever thread crossed the line (the event
#: loop, the collectors' or NVML's thread), and promoted what was alive at that moment.
AGENT_YOUNG_THRESHOLD = 10_000


def tune_agent_gc() -> None:
    """Set the collector for a long-running agent; call once, after the agent is built.

    What start-up made (modules, config, collectors, their kept state) lives as long as the
    process: `gc.freeze` leaves it out of every later collection, so a full collection walks only
    what was made since (mostly the ring of recent frames). No collection first: it would delay the
    first frame by tens of milliseconds to free the few cycles the imports left behind.
    """
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(AGENT_YOUNG_THRESHOLD, middle, oldest)
