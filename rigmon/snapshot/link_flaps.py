"""Link flaps a node's window holds in its counters (incident 5: "a snapshot taken between flaps looks
healthy"): a Thunderbolt/USB4 or network link that went down and up between two frames leaves no reading of it
down, only its ``carrier_changes_total`` moved on; one whose interface went away and came back between two frames
(a thunderbolt-net cable unplugged takes ``thunderbolt0`` along) leaves its counters started again, its received
bytes lower than before. Pure: read from the window's history."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from rigmon.schema import History

#: The counter series a flap moves: the kernel's count of a network interface's carrier changes
#: (``/sys/class/net/<if>/carrier_changes``: up and down each count one).
CARRIER_SUFFIX = ".carrier_changes_total"
#: The counter whose fall says the interface was created again: its received bytes.
BYTES_SUFFIX = ".rx_bytes_total"


@dataclass(frozen=True, slots=True)
class LinkFlaps:
    """One link's carrier changes within the window.

    Attributes:
        series: the counter's series name (``net[thunderbolt0].carrier_changes_total``).
        changes: how many carrier changes the window's points add up to (a drop and a return are two).
        first_at: the first point that counted one (Unix s, the node's clock).
        last_at: the last such point.
        recreated: how many times its interface was created again (its counters fell).
    """

    series: str
    changes: int
    first_at: float
    last_at: float
    recreated: int = 0

    @property
    def link(self) -> str:
        """The series' name without the counter (``net[thunderbolt0]``)."""
        return self.series[: -len(CARRIER_SUFFIX)]


def link_flaps(history: History) -> list[LinkFlaps]:
    """The links whose carrier counter rose within the window, or whose interface was created again in it
    (its received bytes fell from one point to the next), most flaps first.

    A point of a bucket tier counts its own rise (maximum minus minimum) and the rise from the previous
    point's maximum; a counter that falls (the interface re-created) starts again from its new value.
    """
    found: dict[str, LinkFlaps] = {}
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
            found[name[: -len(CARRIER_SUFFIX)]] = LinkFlaps(name, changes, first_at, last_at)
    for name, s in history.series.items():
        if not name.endswith(BYTES_SUFFIX) or len(s.at) < 2:
            continue
        falls = _falls(s.at, s.min, s.max)
        if not falls:
            continue
        link = name[: -len(BYTES_SUFFIX)]
        was = found.get(link)
        if was is None:
            found[link] = LinkFlaps(link + CARRIER_SUFFIX, 0, falls[0], falls[-1], len(falls))
        else:
            found[link] = LinkFlaps(was.series, was.changes, min(was.first_at, falls[0]), max(was.last_at, falls[-1]),
                                    len(falls))
    return sorted(found.values(), key=lambda f: (-f.recreated - f.changes // 2, f.series))


def _falls(at: Sequence[float], lows: Sequence[float], highs: Sequence[float]) -> list[float]:
    """When a counter fell (it was reset: its interface created again), from each point's smallest and largest
    value. A point whose smallest value is below the largest before it holds a reset; after one, the counter
    runs on from the point's smallest value (the new interface's), not from its largest (the old one's last), so
    the next point is held against that."""
    out = []
    floor = highs[0]
    for when, lo, hi in zip(at[1:], lows[1:], highs[1:]):
        if lo < floor:
            out.append(when)
            floor = lo
        else:
            floor = hi
    return out


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + " UTC"


def link_flaps_text(flaps: LinkFlaps) -> str:
    """``net[thunderbolt0]: carrier changed 2 times (down and up once) by 2026-11-28 14:51:16 UTC``, or ``...: went
    away and came back once (a new interface: its counters started again) by ...``, plain text."""
    when = f"by {_stamp(flaps.last_at)}" if flaps.first_at == flaps.last_at else \
        f"between {_stamp(flaps.first_at)} and {_stamp(flaps.last_at)}"
    said = []
    if flaps.recreated:
        said.append("went away and came back " + ("once" if flaps.recreated == 1 else f"{flaps.recreated} times")
                    + " (a new interface: its counters started again)")
    if flaps.changes:
        downs = flaps.changes // 2
        times = "time" if flaps.changes == 1 else "times"
        pairs = "" if not downs else " (down and up once)" if downs == 1 else f" (down and up {downs} times)"
        said.append(f"carrier changed {flaps.changes} {times}{pairs}")
    return f"{flaps.link}: {', '.join(said)} {when}"
