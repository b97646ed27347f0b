"""What the rule engine remembers across an agent restart, as plain frozen records.

The engine exports this (`AlarmEngine.export_memory`) and restores it
(`AlarmEngine.restore_memory`); the agent writes it to ``alarm-state.json`` in its state
directory (`rigmon.agent.alarm_state`). Only memory that fresh readings cannot rebuild
quickly is kept:

* trend buckets (days of path resistance: a corroding connection is a trend over weeks);
* first-seen values of ``below_first_seen`` rules (the speed a link first trained at: a link
  that retrained at 10 Gb/s after a reboot must not become the new normal);
* alarms that had fired, with their acknowledgement: an acknowledged alarm still firing
  after a restart stays acknowledged (same id, same start), and one that cleared while the
  agent was down is resolved (after the rule's ``clear_hold_s``), not forgotten. An alarm
  whose condition was clear but within its ``clear_hold_s`` keeps when that began, so the
  hold is not restarted (nor cut short) by the restart. Latched (event) alarms come back
  as they were;
* the recently resolved alarms of ``/v1/alarms``.

Not kept: whether a reading-derived alarm is firing (re-derived from the first fresh
readings), pending alarms (their hold time starts again), threshold and counter windows
(minutes long: refilled by fresh readings), staleness counts, and the inventory of
``vanished`` rules (re-read at start, so restarting the agent accepts a changed set of GPUs).

The records are frozen `msgspec.Struct`s (cheaper to define at import than dataclasses), not
tracked by the cycle collector (``gc=False``): frozen, holding numbers, strings, tuples and
`Alarm` records, none can be in a cycle. The state file reads and writes them through
`rigmon.typed`, which reads their fields as it reads a dataclass's.
"""

from __future__ import annotations

import msgspec

from rigmon.schema import Alarm


class TrendBucket(msgspec.Struct, frozen=True, gc=False):
    """Values of one trend subject averaged over one bucket of time.

    Attributes:
        index: ``floor(t / bucket_s)`` of the bucket's time (Unix seconds).
        total: sum of the values in the bucket.
        count: number of values in the bucket.
    """

    index: int
    total: float
    count: int


class TrendSeries(msgspec.Struct, frozen=True, gc=False):
    """The buckets of one trend rule for one subject, oldest first."""

    rule: str
    subject: str
    bucket_s: float
    """The rule's ``bucket_s`` when saved: buckets of another width are dropped on restore."""
    buckets: tuple[TrendBucket, ...]


class FirstSeen(msgspec.Struct, frozen=True, gc=False):
    """The first value a ``below_first_seen`` rule saw for a subject (a link's first speed)."""

    rule: str
    subject: str
    value: float


class CarriedAlarm(msgspec.Struct, frozen=True, gc=False):
    """An alarm that had fired when the state was saved.

    Attributes:
        alarm: the record as it was (``firing``, with its acknowledgement if any).
        latch_until: for a latched (event) alarm, Unix seconds when it expires.
        clear_since: Unix seconds since which its condition had been clear, when it was
            within the rule's ``clear_hold_s`` (clear, not yet resolved); the hold goes on
            from there after the restart.
    """

    alarm: Alarm
    latch_until: float | None = None
    clear_since: float | None = None


class EngineMemory(msgspec.Struct, frozen=True, gc=False):
    """Everything the engine keeps across a restart (see the module docstring)."""

    trends: tuple[TrendSeries, ...] = ()
    first_seen: tuple[FirstSeen, ...] = ()
    alarms: tuple[CarriedAlarm, ...] = ()
    recent: tuple[Alarm, ...] = ()


class RestoreSummary(msgspec.Struct, frozen=True, gc=False):
    """What `AlarmEngine.restore_memory` took over and what it dropped (and why)."""

    trend_series: int = 0
    first_seen: int = 0
    alarms: int = 0
    recent: int = 0
    dropped: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line for the operator (``3 trend series, 1 first-seen value, ...``)."""
        parts = [f"{self.trend_series} trend series", f"{self.first_seen} first-seen values",
                 f"{self.alarms} alarms", f"{self.recent} recent alarms"]
        text = ", ".join(parts)
        if self.dropped:
            text += f"; dropped {len(self.dropped)}: " + "; ".join(self.dropped[:5])
            if len(self.dropped) > 5:
                text += "; ..."
        return text
