"""The rail minima of a node's recent frames, and the sag named as the cause of each GPU loss.

Incident 1: the 12 V rail sags and a GPU falls off the bus within tenths of a second to
seconds. The node store feeds `RailMemory` every frame; `rigmon.cluster.incident` names the
sag in the cluster row's reason and the node screen's timeline.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import msgspec

from rigmon.schema import Event
from rigmon.summary import RAIL_WARN_VOLTS

#: A rail sag at most this many seconds before a GPU loss is named with the loss (the latest
#: one when none came within `SAG_CLOSE_S`; the text says how long before).
SAG_BEFORE_S = 30.0
#: The GPUs drop within tenths of a second to seconds of the sag that takes them off the bus
#: (incident 1): the lowest rail minimum this close before a loss is its sag, however much
#: deeper an earlier one was.
SAG_CLOSE_S = 2.0
#: Seconds of rail minima a `RailMemory` keeps to look back from a loss.
RAIL_MEMORY_S = 120.0


class Sag(msgspec.Struct, frozen=True, gc=False):
    """The rail minimum of the sag seen shortly before a moment (volts at Unix seconds ``at``);
    ``before`` is that moment (the GPU loss), when known.

    A frozen msgspec Struct of three numbers (no cycle possible: untracked by the cycle collector)."""

    at: float
    volts: float
    before: float | None = None


class RailMemory:
    """Rail minima of a node's recent frames, and the sag found before each GPU loss.

    The node store feeds it every frame; a ``gpu_lost`` event looks back for the sag just before
    it (`sag_before`), kept by GPU index for `cause_of`.
    """

    def __init__(self, keep_s: float = RAIL_MEMORY_S) -> None:
        self.keep_s = keep_s
        self._points: deque[tuple[float, float]] = deque()
        self._causes: dict[str, Sag] = {}

    def add(self, taken_at: float, rail_min_volts: float | None, events: Iterable[Event]) -> None:
        """One frame: its time, its rail minimum, its events."""
        if rail_min_volts is not None:
            if self._points and taken_at < self._points[-1][0]:
                self._points.clear()
            self._points.append((taken_at, rail_min_volts))
            while self._points and self._points[0][0] < taken_at - self.keep_s:
                self._points.popleft()
        for event in events:
            if event.kind != "gpu_lost":
                continue
            known = self._causes.get(event.subject)
            if known is not None and known.before == event.at:
                continue  # the same loss, seen again
            # A later loss of the same GPU (after a restart) has its own cause, or none: the
            # first loss's sag does not explain it.
            sag = sag_before(self._points, event.at)
            if sag is None:
                self._causes.pop(event.subject, None)
            else:
                self._causes[event.subject] = msgspec.structs.replace(sag, before=event.at)

    def cause_of(self, subject: str) -> Sag | None:
        """The sag before the loss of ``subject`` (``gpu:3``), if one was seen."""
        return self._causes.get(subject)

    def causes(self) -> dict[str, Sag]:
        """The sag before each GPU loss seen, by the loss's subject."""
        return dict(self._causes)


def sag_before(points: Iterable[tuple[float, float]], at: float, window_s: float = SAG_BEFORE_S,
               close_s: float = SAG_CLOSE_S) -> Sag | None:
    """The sag before a GPU loss at ``at``: the lowest rail minimum below `RAIL_WARN_VOLTS` within
    ``close_s`` before ``at`` (a frame taken up to a second after ``at`` counts: its ADC windows
    end at its time); when none came that close, the lowest of the latest run of minima below the
    limit within ``window_s`` (not the deepest of the window: a sag that the rail recovered from
    20 s before did not take the GPU off the bus, and the text says how long before it was)."""
    seen = sorted((t, v) for t, v in points if at - window_s <= t <= at + 1.0)
    close = [(v, t) for t, v in seen if t >= at - close_s and v < RAIL_WARN_VOLTS]
    if close:
        volts, t = min(close)
        return Sag(at=t, volts=volts)
    latest: list[tuple[float, float]] = []
    recovered = False
    for t, v in seen:
        if v >= RAIL_WARN_VOLTS:
            recovered = True
            continue
        if recovered:
            latest, recovered = [], False  # the rail came back above the limit: a new sag
        latest.append((v, t))
    if not latest:
        return None
    volts, t = min(latest)
    return Sag(at=t, volts=volts)


def after_sag(sag: Sag, at: float) -> str:
    """``5 s after rail 11.255 V`` (tenths below 2 s; the rail to the millivolt, as everywhere)."""
    delta = max(0.0, at - sag.at)
    seconds = f"{delta:.1f}" if delta < 2 else f"{delta:.0f}"
    return f"{seconds} s after rail {sag.volts:.3f} V"
