"""Where a replay's recording of a node ended before the cursor: the screens say so instead of "live".

A bundle that does not date its pulls (an older rigmon's, or one read from a journal) cannot tell a
node whose agent died before the others' recordings end from one whose clock runs behind theirs, so
the replay ages no node past its own last frame (`rigmon.cluster.replay.Replay`): such a node's row
would read "live" to the end, as at its last frame. It is not stale (that would be wrong for the
node whose clock runs behind, and would make the others' rules judge it), but its recording has
ended: once the cursor is past its last frame by more than its staleness limit (three of its
sampling intervals), the cluster row and the node screen say "recording ended HH:MM:SS" (its last
frame, on its own clock, UTC) and draw its figures as old. A node whose pull the bundle dates ages
up to it and reads stale as recorded; nothing here is said of it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rigmon.cluster.node_view import STATE_RANK, NodeView
from rigmon.cluster.store import ClusterStore

if TYPE_CHECKING:
    # Types only: a replay is built by `rigmon dash --replay` before the app (see `rigmon.cli_dash`).
    from rigmon.cluster.replay import Replay

#: How the screens name the state of a node whose recording ended before the cursor.
ENDED = "recording ended"


def recording_ends(replay: Replay, cluster: ClusterStore) -> dict[str, float]:
    """The nodes of ``replay`` whose recording ended before its cursor: by store key, the ``taken_at``
    of the node's last frame (its own clock, Unix s).

    Only nodes whose pull the bundle does not date (`rigmon.cluster.replay_clocks.NodeClock.watched_until`)
    and whose last frame (`NodeStore.watched_until` on the replay's clock) the cursor is past by more
    than the node's `NodeStore.stale_after_s`.
    """
    out: dict[str, float] = {}
    for key in replay.keys:
        store = cluster.nodes.get(key)
        if store is None or store.watched_until is None or replay.clock_of(key).watched_until is not None:
            continue
        if replay.at - store.watched_until > store.stale_after_s:
            out[key] = replay.node_time(key, store.watched_until)
    return out


def ended_text(ended_at: float) -> str:
    """``recording ended 00:01:30``: the node's last frame, UTC to the whole second."""
    return f"{ENDED} {time.strftime('%H:%M:%S', time.gmtime(ended_at))}"


def in_display_order(views: Sequence[NodeView], ended: Mapping[str, float]) -> list[NodeView]:
    """``views`` (trouble first) with the nodes whose recording ended ranked as stale ones: after the
    unreachable and stale nodes, before the live ones (otherwise in the order they came)."""
    if not ended:
        return list(views)
    return sorted(views, key=lambda v: STATE_RANK["stale" if v.key in ended else v.state])
