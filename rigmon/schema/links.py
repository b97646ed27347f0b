"""Wire records of network links: interfaces from sysfs and /proc/net/dev, the Thunderbolt/USB4 bus."""

from __future__ import annotations

from typing import Literal

import msgspec

from rigmon.schema.record import Record

LinkState = Literal["ok", "degraded", "unknown"]
ThunderboltKind = Literal["host", "device", "xdomain", "retimer"]


class NetInterfaceReading(Record, frozen=True):
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
    # Added for lost links (additive).
    link_lost: bool | msgspec.UnsetType = msgspec.UNSET
    """An Ethernet, thunderbolt-net, bond or IPoIB link that had a carrier since the agent started and has
    none now (`rigmon.collectors.net_links`); never for one backed by an RDMA port (its port state says it).
    The host collector always sets it; a record built without it (an older agent, the frame golden's)
    leaves the key out of the JSON (``msgspec.UNSET``, falsy)."""


class ThunderboltDeviceReading(Record, frozen=True):
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


RdmaLinkState = Literal["ok", "degraded", "down", "unused", "unknown"]


class RdmaHwCounterReading(Record, frozen=True):
    """One driver-specific counter of an RDMA port (``hw_counters/<name>``: mlx5, irdma...)."""

    name: str
    value_total: int
    value_per_s: float | None = None


class InfinibandPortReading(Record, frozen=True):
    """One RDMA port (InfiniBand, RoCE or iWARP) from ``/sys/class/infiniband/<dev>/ports/<n>``.

    ``state`` and ``phys_state`` are the kernel's names (``ACTIVE``, ``LinkUp``) with their
    numeric ids; ``rate_gbps`` is the port's rate (``100 Gb/sec (4X EDR)`` -> 100.0).
    ``expected_gbps`` is configured, else the best rate seen since the agent started.
    ``link_state``: ``ok``; ``degraded`` when active below the expected rate; ``down`` when
    not active although it was active before, is configured, or is stuck in INIT/ARMED with
    a physical link (no subnet manager); ``unused`` for a port never seen up (the free port
    of a dual-port card); ``unknown`` when ``state`` is unreadable.

    Counters are the kernel's standard port counters (``counters/*``) named after
    node_exporter's infiniband collector; ``port_data_*_bytes_total`` are already in bytes
    (the kernel counts 4-byte words). A counter is ``None`` when its file is absent, and its
    name is in ``unreadable_counters`` when the file is there but the read failed (mlx5
    RoCE ports refuse some IB-only counters). ``errors_total`` sums the error counters the
    port answered at its first read (one answering later joins at 0), ``None`` on a read where
    one of them failed: never a smaller sum; rates are ``None`` on the first read and after a reset.
    """

    name: str
    """``<device>/<port>`` (``mlx5_0/1``): the port's identity in alarms and events."""
    device: str
    port: int
    link_layer: str | None = None
    state: str | None = None
    state_id: int | None = None
    phys_state: str | None = None
    physical_state_id: int | None = None
    rate_gbps: float | None = None
    rate_text: str | None = None
    expected_gbps: float | None = None
    expected_source: Literal["config", "best_seen"] | None = None
    link_state: RdmaLinkState = "unknown"
    degraded_reason: str | None = None
    hca_type: str | None = None
    board_id: str | None = None
    fw_version: str | None = None
    symbol_error_total: int | None = None
    link_downed_total: int | None = None
    link_error_recovery_total: int | None = None
    port_errors_received_total: int | None = None
    port_discards_transmitted_total: int | None = None
    port_transmit_wait_total: int | None = None
    local_link_integrity_errors_total: int | None = None
    excessive_buffer_overrun_errors_total: int | None = None
    port_receive_remote_physical_errors_total: int | None = None
    port_data_received_bytes_total: int | None = None
    port_data_transmitted_bytes_total: int | None = None
    port_packets_received_total: int | None = None
    port_packets_transmitted_total: int | None = None
    errors_total: int | None = None
    port_data_received_bytes_per_s: float | None = None
    port_data_transmitted_bytes_per_s: float | None = None
    port_packets_received_per_s: float | None = None
    port_packets_transmitted_per_s: float | None = None
    errors_per_s: float | None = None
    unreadable_counters: tuple[str, ...] = ()
    hw_counters: tuple[RdmaHwCounterReading, ...] = ()
    # Added for the probed paths (additive).
    netdev: str | None | msgspec.UnsetType = msgspec.UNSET
    """The network interface the port carries (RoCE: ``enp1s0f0np0``, a bond under RoCE LAG) or is
    reached through (IPoIB: ``ib0``): the ``interface`` of a ``[[peers]]`` path over it, which is what
    ties a silent path to its port being down. ``null`` when none is found. The collector always sets
    it; a record built without it (another producer, the frame golden's) leaves the key out of the
    JSON (``msgspec.UNSET``, which is falsy: read it as ``r.netdev or None``)."""


PeerPathState = Literal["ok", "degraded", "silent", "unknown"]


class PeerPathReading(Record, frozen=True):
    """Round trips from this node to one peer over one path, over the last probe window.

    The agent sends small authenticated UDP echo probes (TCP connect round trips where a path
    is configured ``transport = "tcp"``) to each configured peer's address on each path, at
    the configured rate. Times are microseconds: RDMA-class paths answer in single digits,
    TCP over Ethernet in hundreds. Statistics cover the replies received in the last
    ``window_s``; they are ``None`` when no reply arrived in it.

    ``state``: ``ok``; ``degraded`` when the p99 is above the configured limit or probes are
    being lost; ``silent`` when nothing answered in the window although probes were sent (a
    thunderbolt-net lockup while the peer's HTTP is up); ``unknown`` before the first window
    is complete. ``interface`` and ``link_gbps`` are the local interface carrying the path
    (configured) and its speed in this frame, when known.
    """

    name: str
    """``<peer>/<path>`` (``node02/tbnet``): the path's identity in alarms and events."""
    peer: str
    path: str
    address: str
    transport: Literal["udp", "tcp"] = "udp"
    state: PeerPathState = "unknown"
    window_s: float = 0.0
    sent: int = 0
    received: int = 0
    loss_pct: float | None = None
    rtt_p50_us: float | None = None
    rtt_p99_us: float | None = None
    rtt_max_us: float | None = None
    jitter_us: float | None = None
    last_reply_age_s: float | None = None
    interface: str | None = None
    link_gbps: float | None = None
    sent_total: int = 0
    received_total: int = 0
    # Added by the probes' work (issue 21; additive): the limits the state is judged by.
    p99_limit_us: float | None = None
    """The p99 above which the path is degraded (``[probes]`` or the path's ``p99_limit_us``)."""
    loss_limit_pct: float | None = None
    """The loss (percent of probes) above which the path is degraded."""
    p99_over_limit: bool = False
    """``rtt_p99_us`` is above ``p99_limit_us`` in this window."""
    loss_over_limit: bool = False
    """``loss_pct`` is above ``loss_limit_pct`` in this window (a silent path is ``state = silent``, not this)."""
    peer_reachable: bool | None = None
    """Some path to the same peer answered in this window. On a ``silent`` path ``true`` means the
    peer is up on another path, so the failure is this path's (a thunderbolt-net lockup), not the
    node being down. ``None``: the peer has no other path to tell by."""
    error: str | None = None
    """The last error sending on the path (``ECONNREFUSED: Connection refused``: nothing listens on the
    peer's port; ``ENETUNREACH``: no route), cleared by the next reply; ``None``: none."""
    # Added for floods and key mismatches (additive).
    peer_flooded: bool = False
    """A reply in this window said the peer's probe port is flooded (it refuses or drops datagrams beyond
    its budget): the window's loss is suspect, and does not make the path degraded (``loss_over_limit``
    stays false); the peer's ``probe_responder.flooded`` raises its own alarm, and a silent path with it
    raises no ``peer_path_silent``."""
    key_mismatch: bool = False
    """This node's responder refused probes from the peer's address on this path for a bad MAC in this
    window: the two nodes' probe keys differ. The peer refuses this node's probes alike (it never answers
    a bad MAC), so a silent path is the keys, not the network (``peer_path_key_mismatch``, not
    ``peer_path_silent``). Known only when the peer probes this node too."""
    # Added so that one RDMA port down is one alarm (additive).
    rdma_port_down: bool = False
    """The path's ``interface`` is an RDMA port's network interface (RoCE, IPoIB) and that port is not active,
    or was not within the last probe window: the path is silent with its port, whose ``rdma_port_down`` says
    so (``peer_path_silent`` holds back)."""
    peer_rdma_port_down: bool = False
    """The path's ``interface`` is an RDMA port's network interface (an RDMA path) and a reply from the peer in
    this window, on any path, said one of the peer's RDMA ports carrying its probed paths is down: this node's
    RDMA paths to it are silent with that port, whose alarm is on the peer (``peer_path_silent`` holds back)."""


class ProbeResponderReading(Record, frozen=True):
    """The node's latency probe responder (UDP): what it answered and what it refused since the agent started.

    It answers only requests with a valid MAC from a configured peer name, with a reply of the
    request's size, at most ``reply_rate_per_s`` per source address. ``refused_*`` count datagrams
    it did not answer, by reason: ``garbled`` (wrong size, magic, version or kind), ``mac`` (bad
    MAC: a stranger or a different key), ``peer`` (valid MAC but a sender name not configured),
    ``stale`` (send time too far from this node's clock: a replayed request), ``rate``
    (over the source's budget of datagrams, spent before the MAC is checked: a flood).
    """

    address: str
    """``HOST:PORT`` the responder is bound to."""
    answered_total: int = 0
    refused_garbled_total: int = 0
    refused_mac_total: int = 0
    refused_peer_total: int = 0
    refused_stale_total: int = 0
    refused_rate_total: int = 0
    last_refused_from: str | None = None
    """Source address of the last refused datagram."""
    last_refused_reason: str | None = None
    # Added for floods and key mismatches (additive).
    flooded: bool = False
    """Within the last 10 s the responder refused datagrams over a source's budget (``rate``), stopped
    reading for its CPU budget (a quarter of a core) or the kernel dropped datagrams on its full queue:
    the probe port is flooded, and peers' probes of this node lost meanwhile are the flood's, not their
    path's (its replies say so to the probers)."""
    flood_from: str | None = None
    """Source address of the last datagram refused over its budget (``rate``); a flood from many
    (spoofed) sources shows in ``dropped_total`` and ``paused_total`` instead."""
    dropped_total: int | None = None
    """Datagrams the kernel dropped because the responder's socket queue was full (``SO_RXQ_OVFL``);
    ``None`` where the kernel cannot tell."""
    paused_total: int = 0
    """Times the responder stopped reading for the rest of a second, its CPU budget spent."""
    refusing_key_from: tuple[str, ...] = ()
    """Source addresses whose probes were refused for a bad MAC in the last probe window (the most
    recent 16): peers whose probe key differs from this node's (or strangers)."""
