"""One Xid reported by several sources (NVML's event, the kernel log) counted once by event rules.

The agent reports an Xid once from each source it sees it in (``data["source"]``) and both
events stay in its frames and journal; the dashboard shows them as one line
(``rigmon/cluster/xid_merge.py``). An event rule must likewise count one Xid once: the second
report neither adds to the alarm's ``count`` nor replaces its message, so the alarm keeps the
first report's text, the one its firing notification carried.
"""

from __future__ import annotations

from collections import deque

from rigmon.schema import Event

#: Xid events of one GPU and code at most this many seconds apart, from different sources,
#: are one Xid. The same window as the dashboard's ``rigmon.cluster.xid_merge.XID_MERGE_S``:
#: NVML's event is stamped when the agent's event thread wakes, the kernel's from the printk time.
XID_MERGE_S = 5.0
#: Counted Xids remembered per rule: enough for a burst on every GPU of a node.
_KEPT = 64


def same_gpu(a: Event, b: Event) -> bool:
    """Whether two Xid events concern the same GPU: by PCI bus id, else by index, else by subject."""
    bus_a, bus_b = a.data.get("pci_bus_id"), b.data.get("pci_bus_id")
    if bus_a is not None and bus_b is not None:
        return bus_a == bus_b
    index_a, index_b = a.data.get("gpu_index"), b.data.get("gpu_index")
    if index_a is not None and index_b is not None:
        return index_a == index_b
    return a.subject == b.subject


class XidReports:
    """The Xids one rule has counted, each with the sources that reported it."""

    def __init__(self, window_s: float = XID_MERGE_S) -> None:
        self.window_s = window_s
        self._counted: deque[tuple[Event, set[str]]] = deque(maxlen=_KEPT)

    def is_new(self, event: Event) -> bool:
        """Whether ``event`` is an Xid not counted yet (and remember it), False for another
        source's report of one already counted.

        Two reports from the same source are two Xids (the driver logged it twice), as on the
        dashboard. Events that are no Xid, or name no source, are always new.
        """
        source = event.data.get("source")
        if event.kind != "xid" or source is None:
            return True
        source = str(source)
        for counted, sources in self._counted:
            if (source not in sources and counted.data.get("xid") == event.data.get("xid")
                    and abs(counted.at - event.at) <= self.window_s and same_gpu(counted, event)):
                sources.add(source)
                return False
        self._counted.append((event, {source}))
        return True
