"""Where a replay's recording of a node ended before the cursor: the screens say so instead of "live".

Which nodes, and since when, is `rigmon.cluster.recording_end.recording_ends` (the alarm board needs it
too). The cluster row and the node screen say "recording ended HH:MM:SS" (its last frame, on its own
clock, UTC), the link matrix's rows "ended HH:MM:SS" and its column's title "ended", and they draw its
figures as old; the alarms screen dates its alarms as of that frame. The node is not stale: its age and the cluster rules are as recorded.
Of a node whose bundle says how its agent's run ended (`rigmon.cluster.replay.Replay.stopped_cleanly`),
the row and the node screen say that too: ", agent stopped cleanly" or ", agent did not stop cleanly".
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from rigmon.cluster.node_view import STATE_RANK, NodeView
from rigmon.cluster.recording_end import ENDED


def ended_clock(ended_at: float) -> str:
    """``00:01:30``: the node's last frame, UTC to the whole second."""
    return time.strftime("%H:%M:%S", time.gmtime(ended_at))


def how_ended(stopped_cleanly: bool | None) -> str:
    """``agent did not stop cleanly`` (or ``agent stopped cleanly``); ``""`` when the bundle does not say."""
    if stopped_cleanly is None:
        return ""
    return "agent stopped cleanly" if stopped_cleanly else "agent did not stop cleanly"


def ended_text(ended_at: float, stopped_cleanly: bool | None = None) -> str:
    """``recording ended 00:01:30``: the node's last frame, UTC to the whole second; with how its
    agent's run ended when the bundle says (``recording ended 00:01:30, agent did not stop cleanly``)."""
    how = how_ended(stopped_cleanly)
    return f"{ENDED} {ended_clock(ended_at)}" + (f", {how}" if how else "")


def in_display_order(views: Sequence[NodeView], ended: Mapping[str, float]) -> list[NodeView]:
    """``views`` (trouble first) with the nodes whose recording ended ranked as stale ones: after the
    unreachable and stale nodes, before the live ones (otherwise in the order they came)."""
    if not ended:
        return list(views)
    return sorted(views, key=lambda v: STATE_RANK["stale" if v.key in ended else v.state])
