"""One node's summary for the cluster screen (`NodeSummary`, built by `summarize`), and the worst of its last minute."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from msgspec.structs import replace

from rigmon.schema import Alarm, Frame, Record
from rigmon.summary.figures import (
    PathCell,
    PathFigures,
    gpu_figures,
    guard_mark,
    host_figures,
    link_figures,
    path_figures,
    peak_figures,
    rail_figures,
    slowest_link_gbps,
    storage_figures,
    worst_path,
)

#: Collector states that count as a failing collector.
FAILING_STATES = frozenset({"error", "hung"})
#: Seconds over which the cluster screen's "worst" figures (lowest rail minimum, highest GPU
#: peak, slowest link) are taken: long enough that a sag of one training step is still on
#: screen when the operator looks, short enough to be "now".
WORST_WINDOW_S = 60.0


class NodeSummary(Record, frozen=True):
    """The figures the cluster screen shows for one node; ``None`` means unknown ("—").

    A frozen msgspec Struct untracked by the cycle collector (`rigmon.schema.Record`): built or
    decoded for every node every second, and then copied (`msgspec.structs.replace`) by the node
    store's `WorstWindow` and session inventory. It holds numbers, strings and the frozen
    `PathFigures`/`PathCell`, never a mutable value, so it cannot be part of a reference cycle.

    Attributes:
        node: node name from the frame.
        seq: the frame's seq.
        taken_at: the frame's Unix time.
        cpu_pct: CPU busy, 0-100.
        net_bytes_per_s: received plus sent over every interface but loopback.
        rail_min_volts: lowest 12 V rail voltage in the frame's window.
        gpu_power_w: board power of all GPUs together.
        gpus_present: GPUs working now (NVIDIA not lost, and AMD).
        gpus_expected: GPUs in the node's inventory: listed in the frame (a lost GPU stays
            listed); the node store raises it to the most this node has shown.
        gpus_lost: NVIDIA GPUs the frame lists as lost.
        links_healthy: links up at their expected speed.
        links_total: links the node watches; the node store raises it to the most seen.
        storage_bytes_per_s: read plus write over the node's arrays (its disks without arrays).
        arrays_degraded: md arrays whose health is not ``ok``.
        arrays_total: md arrays of the node.
        alarms: alarms firing on the node.
        collectors_failing: collectors in state error or hung.
        gpu_peak_w: highest power peak of one NVIDIA GPU between the last two polls.
        gpu_peak_limit_w: that GPU's power limit.
        link_gbps: slowest Thunderbolt/USB4 link's speed (the lower of rx and tx, Gb/s).
        rail_worst_volts: lowest ``rail_min_volts`` of the frames of the last
            `WORST_WINDOW_S` (the node store's `WorstWindow` fills it; ``None`` until then).
        gpu_peak_worst_w: highest ``gpu_peak_w`` of that window.
        link_worst_gbps: lowest ``link_gbps`` of that window.
        links_unhealthy_worst: most links not healthy at once in that window (a link that
            flapped between two looks shows here).
        alarms_severity: severity of the worst firing alarm counted in ``alarms``.
        guard_mark: the undervolt guard in a few cells (`guard_mark`); empty while armed or absent.
        paths: the node's peer paths (latency probes), ``None`` when it probes none.
        path_worst: the worst of ``paths.worst`` over the frames of the last `WORST_WINDOW_S`
            (by `path_rank`: a path silent within the last minute stays on the row for it).
        links_slow: of the links not healthy, those up but below their expected speed (the
            rest are down or stalled; a link the node no longer lists counts as down).
            ``None`` from an agent that does not say (each link not healthy may be down).
    """

    node: str
    seq: int
    taken_at: float
    cpu_pct: float | None = None
    net_bytes_per_s: float | None = None
    rail_min_volts: float | None = None
    gpu_power_w: float | None = None
    gpus_present: int | None = None
    gpus_expected: int | None = None
    gpus_lost: int | None = None
    links_healthy: int | None = None
    links_total: int | None = None
    storage_bytes_per_s: float | None = None
    arrays_degraded: int | None = None
    arrays_total: int | None = None
    alarms: int | None = None
    collectors_failing: int = 0
    gpu_peak_w: float | None = None
    gpu_peak_limit_w: float | None = None
    link_gbps: float | None = None
    rail_worst_volts: float | None = None
    gpu_peak_worst_w: float | None = None
    link_worst_gbps: float | None = None
    links_unhealthy_worst: int | None = None
    alarms_severity: str | None = None
    guard_mark: str = ""
    paths: PathFigures | None = None
    path_worst: PathCell | None = None
    links_slow: int | None = None


class WorstWindow:
    """The worst of a node's figures over the frames of the last ``window_s`` seconds (frame time).

    A figure that stands for a period shows the worst of it: the lowest rail minimum (the sag
    the critical alarm named), the highest GPU peak, the slowest link, the worst peer path
    (a path silent for a few seconds stays on the row for the window); each frame's own
    figure would show only the newest ADC window.
    """

    def __init__(self, window_s: float = WORST_WINDOW_S) -> None:
        self.window_s = window_s
        self._points: deque[tuple[float, float | None, float | None, float | None, int | None,
                                  PathCell | None]] = deque()

    def add(self, summary: NodeSummary) -> NodeSummary:
        """File one frame's summary; returns it with the ``*_worst_*`` figures of the window."""
        at = summary.taken_at
        if self._points and at < self._points[-1][0]:
            self._points.clear()  # the node's clock went back (a restart, a replay seek)
        unhealthy = (summary.links_total - summary.links_healthy
                     if summary.links_total is not None and summary.links_healthy is not None else None)
        path = summary.paths.worst if summary.paths is not None else None
        self._points.append((at, summary.rail_min_volts, summary.gpu_peak_w, summary.link_gbps, unhealthy, path))
        while self._points[0][0] < at - self.window_s:
            self._points.popleft()
        rails = [p[1] for p in self._points if p[1] is not None]
        peaks = [p[2] for p in self._points if p[2] is not None]
        links = [p[3] for p in self._points if p[3] is not None]
        down = [p[4] for p in self._points if p[4] is not None]
        # The newest first: of equally bad paths, the row shows the latest figures.
        paths = [p[5] for p in reversed(self._points) if p[5] is not None]
        return replace(summary, rail_worst_volts=min(rails) if rails else None,
                       gpu_peak_worst_w=max(peaks) if peaks else None,
                       link_worst_gbps=min(links) if links else None,
                       links_unhealthy_worst=max(down) if down else None,
                       path_worst=worst_path(paths))


def alarm_count(frame: Frame, active: Sequence[Alarm] | None = None) -> int | None:
    """Alarms firing on the node of ``frame``; ``None`` while they are unknown.

    Frames carry alarm transitions as events, not the alarms' state, so the count comes from
    ``active``: the node's active alarms (its agent's /v1/alarms, plus the dashboard's cluster
    rules about it), which the node's store passes. Pending alarms do not count.
    """
    if active is None:
        return None
    return sum(1 for alarm in active if alarm.state == "firing")


#: Severities, worst first.
SEVERITY_ORDER: tuple[str, ...] = ("critical", "warning", "info")


def worst_severity(active: Sequence[Alarm]) -> str | None:
    """Severity of the worst firing alarm of ``active``; ``None`` when none fires."""
    firing = {alarm.severity for alarm in active if alarm.state == "firing"}
    return next((s for s in SEVERITY_ORDER if s in firing), None)


def summarize(frame: Frame) -> NodeSummary:
    """Build the cluster screen's figures for one frame."""
    readings = frame.readings
    host = host_figures(readings)
    gpus = gpu_figures(readings)
    links = link_figures(readings)
    storage = storage_figures(readings)
    peak, limit = peak_figures(readings)
    return NodeSummary(
        node=frame.node,
        seq=frame.seq,
        taken_at=frame.taken_at,
        cpu_pct=host.cpu_pct,
        net_bytes_per_s=host.net_bytes_per_s,
        rail_min_volts=rail_figures(readings),
        gpu_power_w=gpus.power_w,
        gpus_present=gpus.present,
        gpus_expected=gpus.expected,
        gpus_lost=gpus.lost,
        links_healthy=links.healthy,
        links_total=links.total,
        storage_bytes_per_s=storage.bytes_per_s,
        arrays_degraded=storage.arrays_degraded,
        arrays_total=storage.arrays_total,
        alarms=alarm_count(frame),
        collectors_failing=sum(1 for s in frame.collectors.values() if s.state in FAILING_STATES),
        gpu_peak_w=peak,
        gpu_peak_limit_w=limit,
        link_gbps=slowest_link_gbps(readings),
        guard_mark=guard_mark(readings.guard),
        paths=path_figures(readings),
        links_slow=links.slow,
    )
