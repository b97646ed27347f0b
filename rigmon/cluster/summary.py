"""Key figures of one node for the cluster screen: one small function per source, one `NodeSummary`.

Each ``*_figures`` function reads one source's readings of a frame and returns its part of
the summary, ``None`` where the node does not report it. Sources whose readings are not in
the schema yet (rail, GPUs, storage, links) return ``None`` until they are: filling one in
means editing only its function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rigmon.schema import Alarm, Frame, Readings

#: Collector states that count as a failing collector.
FAILING_STATES = frozenset({"error", "hung"})


@dataclass(frozen=True, slots=True)
class HostFigures:
    """Host part of a summary."""

    cpu_pct: float | None = None
    net_bytes_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class GpuFigures:
    """GPU part of a summary."""

    power_w: float | None = None
    present: int | None = None
    expected: int | None = None


@dataclass(frozen=True, slots=True)
class LinkFigures:
    """Thunderbolt/USB4 and network link part of a summary."""

    healthy: int | None = None
    total: int | None = None


@dataclass(frozen=True, slots=True)
class NodeSummary:
    """The figures the cluster screen shows for one node; ``None`` means unknown ("—").

    Attributes:
        node: node name from the frame.
        seq: the frame's seq.
        taken_at: the frame's Unix time.
        cpu_pct: CPU busy, 0-100.
        net_bytes_per_s: received plus sent over every interface but loopback.
        rail_min_volts: lowest 12 V rail voltage in the frame's window.
        gpu_power_w: board power of all GPUs together.
        gpus_present: GPUs seen now.
        gpus_expected: GPUs in the node's inventory.
        links_healthy: links up at their expected speed.
        links_total: links the node watches.
        storage_bytes_per_s: read plus write over the node's arrays.
        alarms: alarms firing on the node.
        collectors_failing: collectors in state error or hung.
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
    links_healthy: int | None = None
    links_total: int | None = None
    storage_bytes_per_s: float | None = None
    alarms: int | None = None
    collectors_failing: int = 0


def host_figures(readings: Readings) -> HostFigures:
    """CPU busy percentage and network throughput (all interfaces but loopback)."""
    cpu = readings.host.cpu_pct if readings.host else None
    rates = [
        rate
        for nic in readings.net
        if nic.name != "lo"
        for rate in (nic.rx_bytes_per_s, nic.tx_bytes_per_s)
        if rate is not None
    ]
    return HostFigures(cpu_pct=cpu, net_bytes_per_s=sum(rates) if rates else None)


def rail_figures(readings: Readings) -> float | None:
    """Lowest 12 V rail voltage of the frame (volts); ``None`` until PSU readings exist."""
    return None


def gpu_figures(readings: Readings) -> GpuFigures:
    """Total GPU board power and GPUs present of expected; unknown until GPU readings exist."""
    return GpuFigures()


def storage_figures(readings: Readings) -> float | None:
    """Read plus write bytes per second over the node's arrays; ``None`` until storage readings exist."""
    return None


def link_figures(readings: Readings) -> LinkFigures:
    """Links up at their expected speed, of all links watched; unknown until link readings exist."""
    return LinkFigures()


def alarm_count(frame: Frame, active: Sequence[Alarm] | None = None) -> int | None:
    """Alarms firing on the node of ``frame``; ``None`` while they are unknown.

    Frames carry alarm transitions as events, not the alarms' state, so the count comes from
    ``active``: the node's active alarms (its agent's /v1/alarms, plus the dashboard's cluster
    rules about it), which the node's store passes. Pending alarms do not count.
    """
    if active is None:
        return None
    return sum(1 for alarm in active if alarm.state == "firing")


def summarize(frame: Frame) -> NodeSummary:
    """Build the cluster screen's figures for one frame."""
    readings = frame.readings
    host = host_figures(readings)
    gpus = gpu_figures(readings)
    links = link_figures(readings)
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
        links_healthy=links.healthy,
        links_total=links.total,
        storage_bytes_per_s=storage_figures(readings),
        alarms=alarm_count(frame),
        collectors_failing=sum(1 for s in frame.collectors.values() if s.state in FAILING_STATES),
    )
