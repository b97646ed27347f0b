"""Each replayed node's clock against the replay's: the offset its pull measured, and until when it was watched.

A frame's ``taken_at`` is its node's clock. Live, the dashboard judges a node by when its frames
arrive, on the dashboard's one clock; a replay that filed every frame at its own ``taken_at``
would let a node whose clock ran ahead carry the cursor past the others' last frames, and they
would read stale. A bundle of this rigmon records, for each node, its agent's clock and the
puller's when the node was pulled (`rigmon.snapshot.bundle.NodePart.agent_now_at`,
``pulled_at``): their difference is how far that node's clock was off. The replay's clock is the
median node's (the puller's own may be off them all, or run a simulator's accelerated time); each
node's frames are filed at their ``taken_at`` minus its offset from it, and nothing after its pull
is known of it. A node the bundle says nothing of (an older bundle, or one read from a journal)
keeps its own times, as before.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rigmon.snapshot.bundle import NodeBundle

#: Offsets from the median node smaller than this are taken as none: a pull measures a node's
#: clock only to within the time its capture took to come in (milliseconds on a LAN, up to about a
#: second from a busy agent), and a clock within it cannot make a node stale
#: (`rigmon.cluster.node_store.STALE_AFTER_S`: 3 s).
PULL_CLOCK_TOLERANCE_S = 1.0


@dataclass(frozen=True, slots=True)
class NodeClock:
    """How one recorded node's clock stands to the replay's.

    Attributes:
        offset_s: the node's clock minus the replay's, in seconds (positive: it ran ahead); its
            frames are filed when the replay's clock reaches their ``taken_at`` minus this.
        watched_until: when it was pulled, on the replay's clock (Unix s): what became of it after
            is not in the bundle. ``None`` when the bundle does not say.
    """

    offset_s: float = 0.0
    watched_until: float | None = None

    def replay_time(self, node_at: float) -> float:
        """The replay's clock when this node's clock read ``node_at``."""
        return node_at - self.offset_s

    def node_time(self, replay_at: float) -> float:
        """This node's clock when the replay's read ``replay_at``."""
        return replay_at + self.offset_s


def node_clocks(nodes: Sequence[NodeBundle]) -> list[NodeClock]:
    """Each node's `NodeClock`, in order: offsets from the median (the lower of the middle two)
    of the nodes' pull-time offsets, within `PULL_CLOCK_TOLERANCE_S` taken as 0."""
    measured = {i: n.agent_now_at - n.pulled_at for i, n in enumerate(nodes)
                if n.agent_now_at is not None and n.pulled_at is not None}
    if not measured:
        return [NodeClock() for _ in nodes]
    # A node's own clock, not a mean of two: with two nodes, the one behind keeps its times.
    reference = statistics.median_low(measured.values())
    out: list[NodeClock] = []
    for i, node in enumerate(nodes):
        if i not in measured or node.agent_now_at is None:
            out.append(NodeClock())
            continue
        offset_s = measured[i] - reference
        offset_s = 0.0 if abs(offset_s) < PULL_CLOCK_TOLERANCE_S else offset_s
        out.append(NodeClock(offset_s, node.agent_now_at - offset_s))
    return out


def unknown_clocks(nodes: Sequence[NodeBundle], clocks: Sequence[NodeClock]) -> list[str]:
    """Names of the nodes with frames whose pull the bundle does not date (`NodeClock.watched_until`)."""
    return [n.node for n, c in zip(nodes, clocks) if n.frames and c.watched_until is None]
