"""Link flaps a node's window holds in its carrier counters (incident 5: "a snapshot taken between flaps looks
healthy"): a Thunderbolt/USB4 or network link that went down and up between two frames leaves no reading of it
down and no event, only its ``carrier_changes_total`` moved on. Pure: read from the window's history."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rigmon.schema import History

#: The counter series a flap moves: the kernel's count of a network interface's carrier changes
#: (``/sys/class/net/<if>/carrier_changes``: up and down each count one).
CARRIER_SUFFIX = ".carrier_changes_total"


@dataclass(frozen=True, slots=True)
class LinkFlaps:
    """One link's carrier changes within the window.

    Attributes:
        series: the counter's series name (``net[thunderbolt0].carrier_changes_total``).
        changes: how many carrier changes the window's points add up to (a drop and a return are two).
        first_at: the first point that counted one (Unix s, the node's clock).
        last_at: the last such point.
    """

    series: str
    changes: int
    first_at: float
    last_at: float

    @property
    def link(self) -> str:
        """The series' name without the counter (``net[thunderbolt0]``)."""
        return self.series[: -len(CARRIER_SUFFIX)]


def link_flaps(history: History) -> list[LinkFlaps]:
    """The links whose carrier counter rose within the window, most changes first.

    A point of a bucket tier counts its own rise (maximum minus minimum) and the rise from the previous
    point's maximum; a counter that falls (the interface re-created) starts again from its new value.
    """
    out: list[LinkFlaps] = []
    for name, s in history.series.items():
        if not name.endswith(CARRIER_SUFFIX) or len(s.at) < 2:
            continue
        changes = 0
        first_at = last_at = None
        previous = s.max[0]
        for at, lo, hi in zip(s.at[1:], s.min[1:], s.max[1:]):
            rise = max(0.0, hi - lo) + max(0.0, lo - previous)
            previous = hi
            if rise > 0:
                changes += round(rise)
                first_at = at if first_at is None else first_at
                last_at = at
        if changes and first_at is not None and last_at is not None:
            out.append(LinkFlaps(name, changes, first_at, last_at))
    return sorted(out, key=lambda f: (-f.changes, f.series))


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + " UTC"


def link_flaps_text(flaps: LinkFlaps) -> str:
    """``net[thunderbolt0]: carrier changed 2 times (down and up once) by 2026-11-28 14:51:16 UTC``, plain text."""
    when = f"by {_stamp(flaps.last_at)}" if flaps.first_at == flaps.last_at else \
        f"between {_stamp(flaps.first_at)} and {_stamp(flaps.last_at)}"
    downs = flaps.changes // 2
    times = "time" if flaps.changes == 1 else "times"
    pairs = "" if not downs else " (down and up once)" if downs == 1 else f" (down and up {downs} times)"
    return f"{flaps.link}: carrier changed {flaps.changes} {times}{pairs} {when}"
