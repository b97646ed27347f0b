"""Cluster rules for the dashboard: nodes unreachable or stale, clock skew, a node far from its peers.

Pure functions from what the dashboard knows about each node (`NodeView`, the newest
frames) to `Observation`s, and `ClusterAlarms`, which feeds them through the same
`AlarmBook` lifecycle as the agent's node rules. No I/O: the dashboard passes ``now``.

A node is known by its key (`NodeView.key`: the dashboard's URL of its agent), never by its
name, which two agents may share (a cloned image): each alarm is about one key, kept in its
``node_key`` label (`alarm_node_key`); the name is what messages and ``Alarm.node`` say.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rigmon.alarms.lifecycle import AlarmBook, Transition
from rigmon.alarms.observations import Observation, Worse
from rigmon.alarms.selector import frame_view, parse_selector
from rigmon.lazy_re import lazy_compile
from rigmon.schema import Alarm, EventValue, Frame, Severity

Direction = Literal["below", "above", "both"]
PeerAggregate = Literal["mean", "min", "max", "sum"]

#: Scale that makes the median absolute deviation estimate a normal spread's sigma.
MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the dashboard knows of one node's agent.

    Attributes:
        node: node name, for messages (need not be unique).
        connected: the client's last request or stream to the agent worked.
        last_received_at: dashboard clock (Unix s) when the newest frame arrived.
        last_taken_at: the node's own clock (``taken_at``) of that frame.
        error: why the node is not connected, if it is not.
        key: the node's unique identity (the dashboard's key of its agent); default its name.
    """

    node: str
    connected: bool
    last_received_at: float | None = None
    last_taken_at: float | None = None
    error: str | None = None
    key: str = ""

    @property
    def identity(self) -> str:
        """``key``, else the name."""
        return self.key or self.node


@dataclass(frozen=True, slots=True)
class ClusterRule:
    """Timing and severity of one cluster rule (see `TrackedRule`)."""

    name: str
    severity: Severity = "warning"
    hold_s: float = 0.0
    clear_hold_s: float = 0.0
    absent_resolve_s: float = 0.0
    kind: str = "cluster"


@dataclass(frozen=True, slots=True)
class PeerCheck:
    """Compare one figure across nodes and flag the node far from the others.

    Attributes:
        name: rule name (``rail_below_peers``).
        select: selector of the figure (``psu_rail.volts.min_volts``, ``gpus[*].power_w``).
        aggregate: how a node's several matches become one figure.
        direction: flag nodes below, above, or either side of the others.
        min_deviation: smallest difference from the peers' median that counts (the
            reading's unit), so nearly identical nodes are never flagged.
        sigmas: and the difference must exceed this many robust standard deviations
            (median absolute deviation) of the peers.
        min_nodes: fewer nodes with the figure than this never flag (with two nodes
            there is no telling which one is off).
        severity: of the alarm.
        hold_s: the node must stay off for this long.
        label: what the figure is, for the alarm's message (``GPU power, all GPUs``);
            default the selector.
        unit: the figure's unit in the message (``W``).
        digits: decimals of the figures in the message.
    """

    name: str
    select: str
    min_deviation: float
    aggregate: PeerAggregate = "mean"
    direction: Direction = "both"
    sigmas: float = 3.0
    min_nodes: int = 3
    severity: Severity = "warning"
    hold_s: float = 30.0
    label: str = ""
    unit: str = ""
    digits: int = 2

    def __post_init__(self) -> None:
        parse_selector(self.select)
        if self.min_deviation < 0 or self.sigmas < 0:
            raise ValueError("min_deviation and sigmas must not be negative")
        if self.min_nodes < 2:
            raise ValueError("min_nodes must be at least 2")


#: Peer checks the dashboard runs by default (incident 7: which node is the weak one).
DEFAULT_PEER_CHECKS: tuple[PeerCheck, ...] = (
    PeerCheck(name="rail_below_peers", select="psu_rail.volts.min_volts", aggregate="min", direction="below",
              min_deviation=0.15, label="12 V rail minimum", unit="V", digits=2),
    PeerCheck(name="gpu_power_below_peers", select="gpus[*].power_w", aggregate="sum", direction="below",
              min_deviation=150.0, label="GPU power (all GPUs)", unit="W", digits=0),
    PeerCheck(name="cpu_far_from_peers", select="host.cpu_pct", direction="both", min_deviation=40.0, hold_s=120.0,
              label="CPU busy", unit="%", digits=0),
)


#: Label of a cluster alarm that holds the key of the node it is about (`NodeView.key`).
NODE_KEY_LABEL = "node_key"


def alarm_node_key(alarm: Alarm) -> str:
    """The key of the node a cluster alarm is about (its name for an alarm made without one)."""
    return alarm.labels.get(NODE_KEY_LABEL, alarm.node)


def _about(key: str, node: str, active: bool, value: EventValue, message: str,
           labels: Mapping[str, str] | None = None, worse: Worse | None = None, restate: bool = False) -> Observation:
    """An observation about the node of ``key``, called ``node`` in its subject and message."""
    return Observation(subject=f"node:{node}", key=key, node=node, active=active, value=value, message=message,
                       labels={"node": node, NODE_KEY_LABEL: key, **(labels or {})}, worse=worse, restate=restate)


#: How the dashboard's reason for a failed attempt begins when the agent answered and refused it
#: (`rigmon.cluster.agent_answers.status_error`): refused its token (401), what it asked with it (403), or
#: the request itself (another 4xx, ``HTTP 400: this agent serves HTTPS ...``: a misaddressed request).
REFUSAL = lazy_compile(r"(?:401 unauthorized|403 forbidden|HTTP 4\d\d):")


def is_refusal(reason: str | None) -> bool:
    """Whether ``reason`` (the dashboard's, for a failed attempt) says the agent answered and refused
    (401/403, or another 4xx: the agent is there, the token or the URL is wrong), rather than did not
    answer (connection refused, timeout), failed (5xx) or answered wrongly."""
    return reason is not None and REFUSAL.match(reason) is not None


def unreachable(nodes: Sequence[NodeView]) -> list[Observation]:
    """A node whose agent does not answer, or answers and refuses the dashboard (its data does not come
    either way); the alarm's message follows the node's current reason."""
    return [_about(n.identity, n.node, not n.connected, n.error, _unreachable_message(n), restate=True) for n in nodes]


def _unreachable_message(node: NodeView) -> str:
    """``node gpu01 unreachable: cannot connect: ...``; an agent that refused says so (it is not unreachable)."""
    if is_refusal(node.error):
        return f"node {node.node} refuses this dashboard: {node.error}"
    return f"node {node.node} unreachable: {node.error or 'no answer'}"


def stale(nodes: Sequence[NodeView], now: float, max_age_s: float,
          recorded_until: Mapping[str, float] | None = None) -> list[Observation]:
    """A connected node whose newest frame arrived more than ``max_age_s`` ago (its sampler stalled).

    Args:
        recorded_until: in a replay, until when each node was watched, by `NodeView.identity`: its
            pull on the replay's clock when the bundle dates it (a node that stalled before its pull
            is judged up to it), else its last recorded frame time (its silence after that, where
            its recording ends or where a node whose clock ran ahead carried the cursor past it,
            is not judged).
    """
    out = []
    for n in nodes:
        if not n.connected or n.last_received_at is None:
            continue
        until = None if recorded_until is None else recorded_until.get(n.identity)
        age_s = max(0.0, (now if until is None else min(now, until)) - n.last_received_at)
        out.append(_about(n.identity, n.node, age_s > max_age_s, round(age_s, 3),
                          f"node {n.node} sent no frame for {age_s:.0f} s", worse="higher"))
    return out


def current(node: NodeView, now: float, max_age_s: float) -> bool:
    """Whether ``node``'s newest frame says how it is at ``now``: connected, and the frame arrived
    within ``max_age_s``. Only such nodes are compared with their peers: a stale node's (its sampler
    stalled) or, in a replay, one whose recording ended before the cursor keeps its last figures,
    which the others' current ones would call far off (a CPU busy 46 % then against 87 % now).
    Unlike `stale`, the age is not capped at where a replay's recording of the node ends."""
    return node.connected and node.last_received_at is not None and now - node.last_received_at <= max_age_s


def clock_offsets(nodes: Sequence[NodeView]) -> dict[str, float]:
    """Each node's clock minus the dashboard's, from its newest frame (includes network delay), by
    `NodeView.identity`."""
    return {n.identity: n.last_taken_at - n.last_received_at for n in nodes
            if n.last_taken_at is not None and n.last_received_at is not None}


def _reference(values: dict[str, float], node: str) -> float:
    """What a node's value is compared with: the median of all nodes, or with two, the other's."""
    if len(values) >= 3:
        return statistics.median(values.values())
    return statistics.median([v for n, v in values.items() if n != node])


def clock_skew(nodes: Sequence[NodeView], max_skew_s: float) -> list[Observation]:
    """A node whose clock differs from the other nodes' by more than ``max_skew_s``.

    Each node is compared with the median offset of all nodes; with two nodes, with the
    other one, so both are flagged (there is no telling which is wrong).
    """
    offsets = clock_offsets(nodes)
    if len(offsets) < 2:
        return []
    names = {n.identity: n.node for n in nodes}
    out = []
    for key, offset in offsets.items():
        skew_s = offset - _reference(offsets, key)
        out.append(_about(key, names[key], abs(skew_s) > max_skew_s, round(skew_s, 3),
                          f"node {names[key]} clock is {skew_s:+.1f} s off its peers"))
    return out


def node_figures(frames: Mapping[str, Frame | dict[str, Any]], select: str,
                 aggregate: PeerAggregate) -> dict[str, float]:
    """One figure per node (keyed as ``frames`` are): the selector's numeric matches in its newest
    frame, aggregated.

    ``frames`` may hold a frame's `frame_view` (or `frame_data`) instead of the frame. The
    selector reads the frame's records as they are and only their values: nothing is converted.
    """
    selector = parse_selector(select)
    out: dict[str, float] = {}
    for node, frame in frames.items():
        data = frame if isinstance(frame, dict) else frame_view(frame)
        values = [float(v) for v in selector.values(data) if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if not values:
            continue
        if aggregate == "min":
            out[node] = min(values)
        elif aggregate == "max":
            out[node] = max(values)
        elif aggregate == "sum":
            out[node] = sum(values)
        else:
            out[node] = sum(values) / len(values)
    return out


def peer_outliers(frames: Mapping[str, Frame | dict[str, Any]], check: PeerCheck,
                  names: Mapping[str, str] | None = None) -> list[Observation]:
    """Nodes whose figure is far from the nodes' median (robust: median and median absolute deviation).

    Nodes without the figure are left out; with fewer than ``check.min_nodes`` nodes
    having it, nothing is flagged.

    Args:
        frames: each node's newest frame by its key (`NodeView.identity`).
        check: the figure and its limits.
        names: node name by key, for the subjects and messages (default: the key).
    """
    figures = node_figures(frames, check.select, check.aggregate)
    if len(figures) < check.min_nodes:
        return []
    median = statistics.median(figures.values())
    mad = statistics.median([abs(v - median) for v in figures.values()])
    limit = max(check.min_deviation, check.sigmas * MAD_TO_SIGMA * mad)
    out = []
    for key, x in figures.items():
        diff = x - median
        off = (diff < -limit if check.direction == "below" else diff > limit if check.direction == "above"
               else abs(diff) > limit)
        node = names.get(key, key) if names is not None else key
        out.append(_about(key, node, off, round(x, 6), peer_message(check, node, x, median),
                          labels={"peer_median": f"{median:g}"},
                          worse="lower" if check.direction == "below"
                          else "higher" if check.direction == "above" else None))
    return out


def peer_message(check: PeerCheck, node: str, value: float, median: float) -> str:
    """A sentence for a node off its peers: ``node01 GPU power (all GPUs) 769 W is below its
    peers' median of 1019 W``."""
    def figure(v: float) -> str:
        text = f"{v:.{check.digits}f}"
        return f"{text} {check.unit}" if check.unit and check.unit != "%" else f"{text}{check.unit}"
    where = "below" if value < median else "above"
    return f"{node} {check.label or check.select} {figure(value)} is {where} its peers' median of {figure(median)}"


class ClusterAlarms:
    """Cluster rules with a lifecycle: call `evaluate` on every dashboard refresh.

    Args:
        unreachable_hold_s: a node must stay unreachable this long before it alarms.
        stale_after_s: a connected node silent this long is stale.
        max_skew_s: clock difference between nodes that alarms.
        peer_checks: figures compared across nodes.
    """

    def __init__(self, unreachable_hold_s: float = 10.0, stale_after_s: float = 10.0, max_skew_s: float = 2.0,
                 peer_checks: Sequence[PeerCheck] = DEFAULT_PEER_CHECKS, recent_limit: int = 200) -> None:
        self.book = AlarmBook("cluster", "cluster", recent_limit)
        self.stale_after_s = stale_after_s
        self.max_skew_s = max_skew_s
        self.peer_checks = tuple(peer_checks)
        self._unreachable = ClusterRule("node_unreachable", "critical", hold_s=unreachable_hold_s)
        self._stale = ClusterRule("node_stale", "warning")
        self._skew = ClusterRule("clock_skew", "warning", hold_s=30.0)
        self._peers = {c.name: ClusterRule(c.name, c.severity, hold_s=c.hold_s) for c in self.peer_checks}
        self.recorded_until: dict[str, float] = {}
        """In a replay: each node's last recorded frame time by key (see `stale`); empty when live."""

    def evaluate(self, nodes: Sequence[NodeView], frames: Mapping[str, Frame], now: float,
                 peers: bool = True) -> list[Transition]:
        """Evaluate every cluster rule.

        Args:
            nodes: every node the dashboard follows.
            frames: the newest frame of each node that has one, by `NodeView.identity`.
            now: the dashboard's Unix time.
            peers: run the peer checks too; they cost most (every node's frame read) and hold
                for 30 s and more, so a dashboard may run them less often than the rest.
        """
        out = self.book.observe(self._unreachable, unreachable(nodes), now)
        out += self.book.observe(self._stale, stale(nodes, now, self.stale_after_s, self.recorded_until), now)
        out += self.book.observe(self._skew, clock_skew(nodes, self.max_skew_s), now)
        if not peers:
            return out
        names = {n.identity: n.node for n in nodes if current(n, now, self.stale_after_s)}
        live: dict[str, Frame | dict[str, Any]] = {key: frame_view(f) for key, f in frames.items() if key in names}
        for check in self.peer_checks:
            out += self.book.observe(self._peers[check.name], peer_outliers(live, check, names), now)
        return out

    def acknowledge(self, alarm_id: str, by: str, now: float) -> list[Transition]:
        """Acknowledge a cluster alarm (see `AlarmBook.acknowledge`)."""
        return self.book.acknowledge(alarm_id, by, now)

    def active(self) -> tuple[Alarm, ...]:
        """Pending and firing cluster alarms."""
        return self.book.active()

    def recent(self) -> tuple[Alarm, ...]:
        """Resolved cluster alarms."""
        return self.book.recent()
