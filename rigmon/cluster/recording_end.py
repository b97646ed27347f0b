"""Which replayed nodes' recordings ended before the cursor: for the screens and the alarm board (no UI).

A bundle that does not date its pulls (an older rigmon's, or one read from a journal) cannot tell a
node whose agent died before the others' recordings end from one whose clock runs behind theirs, so
the replay ages no node past its own last frame (`rigmon.cluster.replay.Replay`): such a node would
read "live" to the end, as at its last frame. It is not stale (that would be wrong for the node whose
clock runs behind, and would make the others' rules judge it), but its recording has ended: once the
cursor is past its last frame by more than its staleness limit (three of its sampling intervals),
the screens say so and its alarms are as of its last frame (`rigmon.cluster.alarm_board.board_view`).
A node whose pull the bundle dates ages up to it and reads stale as recorded; nothing here is said of it.

A bundle read from a journal (`rigmon snapshot --journal`, after a crash) says how the agent's last
run ended (the manifest's ``run_clean``, and ``run_end`` in words: `rigmon.snapshot.run_end`): stopped cleanly, or not (killed,
crashed or the node lost power). Of such a node the bundle knows that nothing came after its last
frame, so its recording ends there, at the cursor's reaching it (the replay's end, in a bundle of
that node alone), and the screens say how (`Replay.stopped_cleanly`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rigmon.cluster.store import ClusterStore

if TYPE_CHECKING:
    # Types only: the replay module imports the alarm board, which takes what this computes.
    from rigmon.cluster.replay import Replay

#: How the screens and the alarm board name the state of a node whose recording ended before the cursor.
ENDED = "recording ended"
def stopped_cleanly(entry: object) -> bool | None:
    """Whether a bundle's manifest entry of a node read from a journal says its agent's last run stopped
    cleanly (its ``run_clean``; ``run_end`` says it in words); ``None`` when it says nothing (a node
    pulled from a running agent, an older bundle)."""
    clean = entry.get("run_clean") if isinstance(entry, dict) else None
    return clean if isinstance(clean, bool) else None


def recording_ends(replay: Replay, cluster: ClusterStore) -> dict[str, float]:
    """The nodes of ``replay`` whose recording ended before its cursor: by store key, the ``taken_at``
    of the node's last frame (its own clock, Unix s).

    Only nodes whose pull the bundle does not date (`rigmon.cluster.replay_clocks.NodeClock.watched_until`)
    and whose last frame (`NodeStore.watched_until` on the replay's clock) the cursor is past by more
    than the node's `NodeStore.stale_after_s`; a node whose bundle says how its agent's run ended
    (`Replay.stopped_cleanly`) from its last frame on.
    """
    out: dict[str, float] = {}
    for key in replay.keys:
        store = cluster.nodes.get(key)
        if store is None or store.watched_until is None or replay.clock_of(key).watched_until is not None:
            continue
        past = replay.at - store.watched_until
        if past > store.stale_after_s or (key in replay.stopped_cleanly and past >= 0):
            out[key] = replay.node_time(key, store.watched_until)
    return out
