"""Wire records of network links: interfaces from sysfs and /proc/net/dev, the Thunderbolt/USB4 bus."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LinkState = Literal["ok", "degraded", "unknown"]
ThunderboltKind = Literal["host", "device", "xdomain", "retimer"]


@dataclass(frozen=True, slots=True)
class NetInterfaceReading:
    """One network interface: link state from sysfs, counters and rates from /proc/net/dev.

    Rates are ``None`` on the first sample and after a counter reset; ``*_total`` are the
    raw kernel counters.
    """

    name: str
    operstate: str | None
    carrier: bool | None
    speed_mbps: int | None
    mtu: int | None
    rx_bytes_total: int
    tx_bytes_total: int
    rx_packets_total: int
    tx_packets_total: int
    rx_errors_total: int
    tx_errors_total: int
    rx_dropped_total: int
    tx_dropped_total: int
    carrier_changes_total: int | None
    rx_bytes_per_s: float | None
    tx_bytes_per_s: float | None
    rx_packets_per_s: float | None
    tx_packets_per_s: float | None
    # Storage and links (added by the storage collectors' work; additive).
    kind: str | None = None
    """``thunderbolt-net``, ``ethernet``, ``wifi``, ``infiniband``, ``bridge``, ``bond``, ``virtual``."""
    stalled: bool = False
    """Up with carrier, but no packet moved for a while although it used to carry traffic."""


@dataclass(frozen=True, slots=True)
class ThunderboltDeviceReading:
    """One router, XDomain host or retimer on the Thunderbolt/USB4 bus.

    ``*_speed_gbps`` are per lane (``20.0`` for a Gen 3 / USB4 lane); ``rx_gbps`` and
    ``tx_gbps`` are speed times lanes. ``expected_gbps`` is the bandwidth per direction the
    link should have: configured, else the nominal rate of its generation or the best seen
    since the agent started, whichever is higher (``expected_source`` says which).
    ``link_state`` is ``degraded`` below it or when rx and tx differ, ``unknown`` for the
    host router and retimers (they have no link files) and when the facts to judge by are
    missing; ``unknown_reason`` then says which (``no rx_lanes, tx_lanes``). A link whose
    lane count is unreadable is still judged on its per-lane speed.
    """

    name: str
    kind: ThunderboltKind
    domain: int | None
    vendor: str | None
    device_name: str | None
    generation: int | None
    authorized: bool | None
    unique_id: str | None
    nvm_version: str | None
    rx_speed_gbps: float | None
    tx_speed_gbps: float | None
    rx_lanes: int | None
    tx_lanes: int | None
    rx_gbps: float | None
    tx_gbps: float | None
    expected_gbps: float | None
    expected_source: Literal["config", "generation", "best_seen"] | None
    link_state: LinkState
    degraded_reason: str | None
    unknown_reason: str | None = None
