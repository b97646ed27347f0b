"""ClusterStore: the per-node stores of every node the dashboard follows, and the cluster rules over them.

One node's store is `rigmon.cluster.node_store.NodeStore`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import msgspec

from rigmon.alarms.cluster import ClusterAlarms, alarm_node_key
from rigmon.alarms.lifecycle import Transition
from rigmon.clock import Clock
from rigmon.cluster.node_store import STALE_AFTER_S, NodeStore
from rigmon.cluster.node_view import NodeState, NodeView, trouble_order
from rigmon.schema import Alarm, Frame, Readings

__all__ = ["PEER_CHECK_EVERY_S", "STALE_AFTER_S", "ClusterStore", "NodeStore", "contiguous"]

#: Seconds between runs of the cluster rules' peer checks (they hold for 30 s and more, and
#: comparing every node's frame costs far more than the other rules).
PEER_CHECK_EVERY_S = 5.0
#: Fields of `Readings`, and readings with none of them.
READINGS_FIELDS = frozenset(Readings.__struct_fields__)
EMPTY_READINGS = Readings()


class ClusterStore:
    """The stores of every node the dashboard follows, by key, and the cluster rules over them.

    Args:
        clock: time source of the stores and the cluster rules.
        stale_after_s: see `NodeStore`.
        rules: makes the cluster rules (default: `ClusterAlarms` with its defaults).
    """

    def __init__(self, clock: Clock, stale_after_s: float = STALE_AFTER_S,
                 rules: Callable[[], ClusterAlarms] = ClusterAlarms) -> None:
        self.clock = clock
        self.stale_after_s = stale_after_s
        self.nodes: dict[str, NodeStore] = {}
        self._make_rules = rules
        self.rules = rules()
        self._peers_at: float | None = None
        # Sort key of each node's last view (by node key), reused while the view is the same object.
        self._order: dict[str, tuple[NodeView, tuple[int, int, int, int, str]]] = {}
        # Each node's newest frame cut to what the peer checks read (`_peer_frames`), by node key.
        self._peer_cut: dict[str, tuple[Frame, Frame]] = {}

    def evaluate_alarms(self) -> list[Transition]:
        """Run the cluster rules over every node now (the dashboard calls this on each refresh);
        the peer checks at most every `PEER_CHECK_EVERY_S`."""
        now = self.clock.time()
        peers = self._peers_at is None or not 0 <= now - self._peers_at < PEER_CHECK_EVERY_S
        if peers:
            self._peers_at = now
        # The frames are read by the peer checks only.
        frames = self._peer_frames() if peers else {}
        names = self.rule_names()
        return self.rules.evaluate([s.rule_view(names[k]) for k, s in self.nodes.items()], frames, now, peers=peers)

    def rule_names(self) -> dict[str, str]:
        """The name each node (by key) has in the cluster rules' messages and ``Alarm.node``: its
        own name, or when several followed agents share it, the name and the key (``gpu01
        (http://10.0.0.2:9120)``), so that the operator can tell which one is meant. The rules
        know each node by its key (`rigmon.alarms.cluster.alarm_node_key`), whatever its name."""
        count: dict[str, int] = {}
        for store in self.nodes.values():
            count[store.name] = count.get(store.name, 0) + 1
        return {key: store.name if count[store.name] == 1 else f"{store.name} ({key})"
                for key, store in self.nodes.items()}

    def _peer_frames(self) -> dict[str, Frame]:
        """Each node's newest frame, by key, with only the readings the peer checks' selectors start
        from (converting the rest for every node was most of the rules' cost); whole frames
        when a selector starts from anything else."""
        roots = {re.match(r"[A-Za-z_]*", check.select).group() for check in self.rules.peer_checks}  # type: ignore[union-attr]
        if not roots <= READINGS_FIELDS:
            return {s.key: s.latest for s in self.nodes.values() if s.latest is not None}
        cut = {name: getattr(EMPTY_READINGS, name) for name in READINGS_FIELDS - roots}
        out: dict[str, Frame] = {}
        for store in self.nodes.values():
            frame = store.latest
            if frame is not None:
                cached = self._peer_cut.get(store.key)
                if cached is None or cached[0] is not frame:
                    cached = (frame, msgspec.structs.replace(frame, readings=msgspec.structs.replace(frame.readings, **cut)))
                    self._peer_cut[store.key] = cached
                out[store.key] = cached[1]
        return out

    def cluster_alarms_of(self, key: str) -> tuple[Alarm, ...]:
        """Active cluster alarms about the node of ``key``."""
        return tuple(a for a in self.rules.active() if alarm_node_key(a) == key)

    def clear(self) -> None:
        """Forget every node's data and the cluster alarms (a replay seeking backwards); keys stay."""
        for key in list(self.nodes):
            # The same agents' data again: no answer is another agent's (the generations stay).
            self._fresh(key, self.nodes[key].generation)
        self.rules = self._make_rules()
        self._peers_at = None

    def start_afresh(self, key: str) -> NodeStore:
        """Replace the store of ``key`` with an empty one of the same key and URL, and return it.

        Live, for another agent answering at the node's URL as another node (`rigmon.cluster.identity.AgentNames`):
        nothing the old agent sent (trends, the history held for it, events, alarms, restarts, the GPUs and links
        it showed) is the new node's, so that a trend never runs on across two machines. The new store is of
        the next generation (`NodeStore.generation`): answers asked for before are dropped (`current`).
        """
        return self._fresh(key, self.nodes[key].generation + 1)

    def _fresh(self, key: str, generation: int) -> NodeStore:
        """Replace the store of ``key`` with an empty one of ``generation`` (same key and URL), and return it."""
        store = self.nodes[key] = NodeStore(key, self.nodes[key].url, self.clock, self.stale_after_s,
                                            generation=generation)
        self._order.pop(key, None)
        self._peer_cut.pop(key, None)
        return store

    def current(self, key: str, generation: int) -> NodeStore | None:
        """The store of ``key`` when it is of ``generation`` (an answer asked for under it, such as an alarm
        poll's, is filed there); ``None`` when the node's store was started afresh since (`start_afresh`):
        the answer is the agent's that answered at the URL before, and is dropped, not shown against the new
        agent's. ``None`` too for a key not followed."""
        store = self.nodes.get(key)
        return store if store is not None and store.generation == generation else None

    def add(self, key: str, url: str) -> NodeStore:
        """Add (or return) the store of one node."""
        if key not in self.nodes:
            self.nodes[key] = NodeStore(key, url, self.clock, self.stale_after_s)
        return self.nodes[key]

    def peers_up(self, store: NodeStore) -> frozenset[str]:
        """Peers of ``store``'s silent paths that are live on this dashboard (their agents
        answer over HTTP while the path does not: a link lockup, not a dead node)."""
        paths = store.summary.paths if store.summary is not None else None
        if paths is None or not paths.silent:
            return frozenset()
        silent = {c.peer for c in paths.paths if c.state == "silent"}
        return frozenset(s.name for s in self.nodes.values() if s.name in silent and s.state() == "live")

    def views(self, points: int | None = 120, buckets: int = 60) -> list[NodeView]:
        """Every node's view, trouble first; nodes of one name told apart by their keys (`rule_names`)."""
        about: dict[str, list[Alarm]] = {}
        for alarm in self.rules.active():
            about.setdefault(alarm_node_key(alarm), []).append(alarm)
        keyed = []
        names = self.rule_names()
        for store in self.nodes.values():
            view = store.view(points, buckets, tuple(about.get(store.key, ())), peers_up=self.peers_up(store),
                              label=names[store.key])
            # Most views are the same objects as at the last redraw: so is their place.
            cached = self._order.get(store.key)
            order = cached[1] if cached is not None and cached[0] is view else trouble_order(view)
            self._order[store.key] = (view, order)
            keyed.append((order, view))
        keyed.sort(key=lambda pair: pair[0])
        return [view for _, view in keyed]

    def counts(self) -> dict[NodeState, int]:
        """Nodes per state."""
        out: dict[NodeState, int] = {"live": 0, "stale": 0, "refused": 0, "unreachable": 0, "connecting": 0}
        for store in self.nodes.values():
            out[store.state()] += 1
        return out


def contiguous(seqs: Sequence[int]) -> bool:
    """Whether ``seqs`` go up by one each step (a history without a hole)."""
    return all(b == a + 1 for a, b in zip(seqs, seqs[1:]))
