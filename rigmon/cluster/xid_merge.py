"""One line per Xid in the dashboard's event lists and REPORT.md: the NVML and kernel-log reports of one Xid merged.

The agent reports an Xid once from each source it sees it in (``data["source"]``: ``nvml``
from NVML's event set, ``kmsg`` from the kernel log), and both events stay in its frames,
journal and bundles. The dashboard and a bundle's REPORT.md show them as one event naming both
sources. Pure functions, no Textual: here, so that `rigmon.snapshot` (which may not import the
UI) lists one Xid as the dashboard does.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec.structs import replace

# One Xid for the screen as for the agent's event rules: the same window, the same GPU test.
from rigmon.alarms.event_reports import XID_MERGE_S, same_gpu
from rigmon.schema import Event

__all__ = ["SOURCE_NAMES", "XID_MERGE_S", "merge_xid_events"]

#: How each source is named on screen, in this order.
SOURCE_NAMES: dict[str, str] = {"nvml": "NVML", "kmsg": "kernel log"}


def _source(event: Event) -> str:
    return str(event.data.get("source", ""))


def _merged(group: list[Event]) -> Event:
    """One event for the reports of one Xid: the kernel's words (the driver's own text, often
    more precise than NVML's code name), the earliest time, and every source named."""
    shown = next((e for e in group if _source(e) == "kmsg"), group[0])
    sources = {_source(e) for e in group}
    ordered = [s for s in SOURCE_NAMES if s in sources] + sorted(s for s in sources if s not in SOURCE_NAMES)
    names = " and ".join(SOURCE_NAMES.get(s, s) for s in ordered)
    return replace(shown, at=min(e.at for e in group), message=f"{shown.message.rstrip('.')} ({names})")


def merge_xid_events(events: Sequence[Event], window_s: float = XID_MERGE_S) -> tuple[Event, ...]:
    """``events`` (one node's, oldest first) with each Xid reported by several sources as one event.

    Two ``xid`` events are one Xid when their sources differ, they name the same GPU and Xid
    code, and they are at most ``window_s`` apart. The merged event takes the place of the
    first of its reports in ``events``. Two reports from the same source stay two events: the driver logged
    the Xid twice.

    Returns:
        The events to show, oldest first.
    """
    # Frames arrive in order but a kernel line's time can precede an NVML event filed
    # before it: compare every pair of Xid events, not only neighbours.
    xids = [i for i, e in enumerate(events) if e.kind == "xid"]
    merged: dict[int, Event] = {}
    taken: set[int] = set()
    for n, i in enumerate(xids):
        if i in taken:
            continue
        group = [events[i]]
        for j in xids[n + 1:]:
            other = events[j]
            if (j not in taken and other.data.get("xid") == group[0].data.get("xid")
                    and abs(other.at - group[0].at) <= window_s
                    and _source(other) not in {_source(e) for e in group} and same_gpu(group[0], other)):
                group.append(other)
                taken.add(j)
        if len(group) > 1:
            merged[i] = _merged(group)
    return tuple(merged.get(i, e) for i, e in enumerate(events) if i not in taken)
