"""The events the dashboard keeps of a node: the job's marks apart from the rest, so that a job
marking every checkpoint never pushes the hardware's trouble (a lost GPU, an Xid, a rail sag) out."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Iterator

from rigmon.schema import Event

#: Events other than marks kept per node for the node screen (the hardware's, the alarms'...).
EVENTS_KEPT = 200
#: Marks kept per node besides them: 200 are 100 minutes of a job marking every 30 s.
MARKS_KEPT = 200
#: The event kind of a job's own mark (POST /v1/marks, ``rigmon mark``).
MARK_KIND = "mark"


class KeptEvents:
    """A node's newest events, oldest first: the newest ``kept`` that are not marks and the
    newest ``marks_kept`` marks, each bound on its own.

    Read back in arrival order (the order frames brought them, which is their time order while
    frames come in order): while neither bound is reached, exactly the events filed.

    Args:
        kept: events other than marks kept at most.
        marks_kept: marks kept at most.
    """

    def __init__(self, kept: int = EVENTS_KEPT, marks_kept: int = MARKS_KEPT) -> None:
        # Each event with its place in the arrival order, which merges the two back into one.
        self._others: deque[tuple[int, Event]] = deque(maxlen=kept)
        self._marks: deque[tuple[int, Event]] = deque(maxlen=marks_kept)
        self._filed = 0

    def extend(self, events: Iterable[Event]) -> None:
        """File ``events`` (oldest first) after those filed before."""
        for event in events:
            self._filed += 1
            (self._marks if event.kind == MARK_KIND else self._others).append((self._filed, event))

    def __iter__(self) -> Iterator[Event]:
        """The events kept, oldest first (arrival order)."""
        return (event for _, event in heapq.merge(self._others, self._marks, key=lambda pair: pair[0]))

    def __len__(self) -> int:
        return len(self._others) + len(self._marks)
