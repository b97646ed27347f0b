"""NodeView: what the screens draw for one node, and the order that puts nodes in trouble first."""

from __future__ import annotations

import math
from typing import Literal

import msgspec

from rigmon.alarms.cluster import is_refusal
from rigmon.cluster.incident import Problem, Sag
from rigmon.summary import RAIL_CRITICAL_VOLTS, NodeSummary

NodeState = Literal["connecting", "live", "stale", "refused", "unreachable"]

#: Order of trouble: the cluster screen lists unreachable nodes first, then the nodes whose agent
#: answers but refuses this dashboard (a wrong token or URL: no data either), then stale ones.
STATE_RANK: dict[NodeState, int] = {"unreachable": 0, "refused": 1, "stale": 2, "connecting": 3, "live": 4}
#: States of a node whose figures are not current: its last ones are drawn faint, with how old they are.
OUT_OF_TOUCH: frozenset[NodeState] = frozenset({"stale", "refused", "unreachable"})


def node_state(state: NodeState, reason: str | None) -> NodeState:
    """The state the screens name for a node the store says is in ``state`` for ``reason``: ``refused``
    when its last attempt failed because the agent answered 401 or 403 (it is there, and says no to
    this dashboard's token: "unreachable" would send the operator to the network or the agent's
    service) or another 4xx (it is there, and says no to the request: a wrong URL, such as
    ``http://`` for an agent that serves HTTPS); else ``state``."""
    return "refused" if state == "unreachable" and is_refusal(reason) else state


class NodeView(msgspec.Struct, frozen=True, gc=False):
    """What the screens draw for one node at one moment; built by `NodeStore.view`.

    A frozen msgspec Struct untracked by the cycle collector: built for every node whose figures
    changed at each screen refresh (every node, every second). It cannot be part of a reference
    cycle: frozen, it holds strings, numbers, frozen records (`NodeSummary`, `Problem`, `Sag`) and
    dicts built for it of tuples of floats and of `Sag`s, into which nothing puts a view.

    Attributes:
        key: identity of the node on the dashboard (its URL).
        name: node name from its frames, or the URL's host:port before the first frame.
        url: agent base URL.
        state: live, stale, unreachable, refused (the agent answered 401, 403 or another 4xx: see
            `node_state`), or connecting (no answer and no failure yet).
        reason: why the node is not live, when the client knows (the last failure).
        age_s: seconds since the last frame arrived; ``None`` before the first.
        last_data_at: when the last frame arrived, on the dashboard's clock (Unix s, as ``age_s``
            counts from it); ``None`` before the first.
        summary: key figures of the latest frame.
        arrays_unknown: md arrays of the latest frame whose state is not known now (/proc/mdstat
            unreadable: `rigmon.schema.raid_unknown`); not counted in ``summary.arrays_degraded``.
        trends: downsampled recent series by name (see `rigmon.cluster.history.SERIES`).
        details: downsampled per-device series by name (see
            `rigmon.summary.detail_values`); empty unless the view asked for them.
        problems: what is wrong with the node now, worst first (`rigmon.cluster.incident.problems`).
        sags: the rail sag seen before each lost GPU, by subject (``gpu:3``); only with details.
        restarts: agent restarts seen (a new run id).
        frames_lost: frames the agent could no longer send after a disconnect.
        trend_span_s: seconds from the oldest to the newest frame the trends cover; ``None``
            before two frames.
        gpu_power_limit_w: power limits of the working NVIDIA GPUs added up (the top of the
            power trend's scale); ``None`` when the node reports none.
        label: the node as the screens name it: its name, or, when other followed agents share
            that name, the name and its key (``node01 (http://10.0.0.2:9871)``, as
            `ClusterStore.rule_names`); ``""``: its name.
    """

    key: str
    name: str
    url: str
    state: NodeState
    reason: str | None
    age_s: float | None
    summary: NodeSummary | None
    trends: dict[str, tuple[float, ...]] = msgspec.field(default_factory=dict)
    details: dict[str, tuple[float, ...]] = msgspec.field(default_factory=dict)
    problems: tuple[Problem, ...] = ()
    sags: dict[str, Sag] = msgspec.field(default_factory=dict)
    restarts: int = 0
    frames_lost: int = 0
    trend_span_s: float | None = None
    gpu_power_limit_w: float | None = None
    label: str = ""
    last_data_at: float | None = None
    arrays_unknown: int = 0


def hardware_trouble(view: NodeView) -> int:
    """How many of these a node has: a GPU missing against its inventory, a rail minimum
    below `RAIL_CRITICAL_VOLTS` in its recent trend (or latest frame), a degraded link, a
    degraded md array, a silent peer path."""
    summary = view.summary
    if summary is None:
        return 0
    rail = [v for v in view.trends.get("rail_min_volts", ()) if not math.isnan(v)]
    rail += [v for v in (summary.rail_min_volts, summary.rail_worst_volts) if v is not None]
    return sum((
        summary.gpus_present is not None and summary.gpus_expected is not None
        and summary.gpus_present < summary.gpus_expected,
        bool(rail) and min(rail) < RAIL_CRITICAL_VOLTS,
        summary.links_healthy is not None and summary.links_total is not None
        and summary.links_healthy < summary.links_total,
        bool(summary.arrays_degraded),
        summary.paths is not None and summary.paths.silent > 0,
    ))


def trouble_order(view: NodeView) -> tuple[int, int, int, int, str]:
    """Sort key putting trouble first: unreachable, refused, stale, hardware trouble (lost GPU, low
    rail, degraded link or array), alarms, failing collectors, then by name."""
    summary = view.summary
    alarms = (summary.alarms or 0) if summary else 0
    failing = summary.collectors_failing if summary else 0
    return (STATE_RANK[view.state], -hardware_trouble(view), -alarms, -failing, view.name)
