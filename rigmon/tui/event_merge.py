"""One line per Xid in the dashboard's event lists: the pure merge lives in `rigmon.cluster.xid_merge`,
shared with REPORT.md; the screens and their tests take it from here."""

from __future__ import annotations

from rigmon.cluster.xid_merge import SOURCE_NAMES, XID_MERGE_S, merge_xid_events

__all__ = ["SOURCE_NAMES", "XID_MERGE_S", "merge_xid_events"]
