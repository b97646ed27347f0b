"""Latency probes to the configured peers: one `PeerPathReading` per peer and path, and the node's responder."""

from __future__ import annotations

import ipaddress
import logging
import math
import time
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

import msgspec

from rigmon.clock import Clock
from rigmon.collectors.base import (
    CollectorContext,
    CollectorError,
    EventDraft,
    NoData,
    PushFn,
)
from rigmon.config import AgentConfig, PeerPathSection, PeerSection, split_listen
from rigmon.hw.addresses import IpAddress
from rigmon.hw.root import HostRoot
from rigmon.schema import PeerPathReading, PeerPathState

if TYPE_CHECKING:
    # The probes' code is imported where [[peers]] are configured (`PeerProbeCollector`), not by every agent.
    from rigmon.probes.responder import ProbeResponder
    from rigmon.probes.sender import PathWindow, ProbeSender

log = logging.getLogger(__name__)

#: A path is silent once this share of a window's probes in a row went unanswered (2 s of the
#: default 10 s window), and at least `SILENT_MIN_PROBES` of them: a path that stops answering
#: alarms within seconds, not once its whole window is empty (or, for a shorter outage, never).
SILENT_SHARE = 0.2
SILENT_MIN_PROBES = 5


def silent_after(rate_hz: float, window_s: float) -> int:
    """Unanswered probes in a row that make a path silent (the whole window's, when it holds fewer)."""
    return max(SILENT_MIN_PROBES, math.ceil(rate_hz * window_s * SILENT_SHARE - 1e-9))


def judge_path(window: PathWindow, p99_limit_us: float, loss_limit_pct: float, complete: bool,
               silent_run: int | None = None) -> tuple[PeerPathState, bool, bool]:
    """A path's state from its window: ``(state, p99_over_limit, loss_over_limit)``.

    ``unknown`` until the first window is ``complete`` or while no probe is due; ``silent``
    when probes were due and none was answered, or when the last ``silent_run`` due probes in
    a row were not (the path stopped answering); ``degraded`` when the p99 or the loss is
    above its limit; else ``ok``. Loss while the peer says its probe port is flooded is the
    flood's as much as the path's: it is not held against the path (the peer alarms instead).
    """
    stats = window.stats
    p99_over = stats.p99_us is not None and stats.p99_us > p99_limit_us
    loss_over = (stats.received > 0 and stats.loss_pct is not None and stats.loss_pct > loss_limit_pct
                 and not window.peer_flooded)
    if not complete or stats.sent == 0:
        return "unknown", p99_over, loss_over
    if stats.received == 0 or (silent_run is not None and window.unanswered_run >= silent_run):
        return "silent", False, False
    if p99_over or loss_over:
        return "degraded", p99_over, loss_over
    return "ok", False, False


def with_peer_reachable(readings: Sequence[PeerPathReading]) -> list[PeerPathReading]:
    """Each reading with ``peer_reachable``: whether any path to the same peer answers (some reply in
    the window, and not silent now; ``None`` for a peer with one path)."""
    answering: set[str] = set()
    paths: dict[str, int] = {}
    for r in readings:
        paths[r.peer] = paths.get(r.peer, 0) + 1
        if r.received > 0 and r.state != "silent":
            answering.add(r.peer)
    return [msgspec.structs.replace(r, peer_reachable=None if paths[r.peer] < 2 else r.peer in answering)
            for r in readings]


def same_address(a: str, b: str) -> bool:
    """Whether two numeric addresses are the same host: an IPv6 zone (``%thunderbolt0``) and an
    IPv4-mapped form (``::ffff:10.0.0.2``, how a responder bound to ``::`` sees IPv4) aside."""
    try:
        x, y = (ipaddress.ip_address(v.split("%", 1)[0]) for v in (a, b))
    except ValueError:
        return a == b
    x = x.ipv4_mapped or x if isinstance(x, ipaddress.IPv6Address) else x
    y = y.ipv4_mapped or y if isinstance(y, ipaddress.IPv6Address) else y
    return x == y


def _describe(r: PeerPathReading) -> str:
    flood = f"; {r.peer} says its probe port is flooded" if r.peer_flooded else ""
    if r.state == "silent":
        if r.key_mismatch:
            return (f"key mismatch: this node refuses {r.peer}'s probes from {r.address} for a bad MAC, and "
                    f"{r.peer} refuses this node's alike: the probe keys differ ([probes] key_file, or the "
                    "[agent] read token it is derived from, must be the same on every node)")
        also = {True: f", while {r.peer} answers on its other paths", False: f"; {r.peer} answers on no path",
                None: ""}[r.peer_reachable]
        if r.received > 0 and r.last_reply_age_s is not None:
            return f"no reply for {r.last_reply_age_s:.1f} s{also}{flood}"
        return f"no reply to {r.sent} probes in {r.window_s:g} s{also}{flood}"
    parts = []
    if r.p99_over_limit and r.rtt_p99_us is not None:
        parts.append(f"p99 {r.rtt_p99_us:.0f} us above {r.p99_limit_us or 0:.0f} us")
    if r.loss_over_limit and r.loss_pct is not None:
        parts.append(f"{r.loss_pct:.1f} % lost")
    if r.rtt_p50_us is not None:
        parts.append(f"p50 {r.rtt_p50_us:.0f} us")
    return ", ".join(parts) + flood


def path_events(before: Mapping[str, PeerPathState], now: Sequence[PeerPathReading], at: float) -> list[EventDraft]:
    """Events for paths whose state changed since the previous sample (``before``: state by path name)."""
    out: list[EventDraft] = []
    for r in now:
        was = before.get(r.name, "unknown")
        if r.state == was or r.state == "unknown":
            continue
        subject = f"peer:{r.name}"
        data: dict[str, str | int | float | bool | None] = {
            "peer": r.peer, "path": r.path, "address": r.address, "transport": r.transport, "from_state": was,
            "state": r.state, "rtt_p50_us": r.rtt_p50_us, "rtt_p99_us": r.rtt_p99_us, "loss_pct": r.loss_pct}
        if r.state == "silent":
            out.append(EventDraft("peer_path_silent", "warning", subject,
                                  f"path {r.name} ({r.address}) stopped answering: {_describe(r)}", data, at))
        elif r.state == "degraded":
            # Out of silence, the outage's losses stay in the window for a while: the path answers again.
            how = "answers again, degraded" if was == "silent" else "degraded"
            out.append(EventDraft("peer_path_degraded", "warning", subject,
                                  f"path {r.name} ({r.address}) {how}: {_describe(r)}", data, at))
        elif was in ("silent", "degraded"):
            out.append(EventDraft("peer_path_recovered", "info", subject,
                                  f"path {r.name} ({r.address}) answers normally again: {_describe(r)}", data, at))
    return out


class PeerProbeCollector:
    """Probes every configured peer over every path, and answers the peers' probes.

    `start` binds the UDP responder and starts its thread and the sender's; `collect` turns
    each path's window into a reading. No ``[[peers]]``: absent.
    """

    name = "peer_probes"

    def __init__(self, root: HostRoot, clock: Clock, config: AgentConfig, key: bytes | None,
                 own_addresses: Collection[IpAddress] = ()) -> None:
        self.root = root
        self.clock = clock
        self.config = config
        self.key = key
        self._paths: dict[str, PeerPathSection] = {}
        peers = config.probed_peers
        if peers:
            from rigmon.probes.sender import PathTarget
        targets: list[PathTarget] = []
        self._own_note = config.own_peer_note
        if self._own_note is not None:
            log.info("%s", self._own_note)
        #: What is said of entries skipped as this node by their address (`rigmon.probes.own_paths`).
        self.own_address_notes: tuple[str, ...] = ()
        if peers:
            peers = self._skip_own_addresses(peers, own_addresses)
        for peer in peers:
            for path in peer.paths:
                target = PathTarget(peer.name, path.name, path.address, path.target_port(config.probes),
                                    path.transport)
                self._paths[target.name] = path
                targets.append(target)
        self.sender: ProbeSender | None = None
        self._targets = targets
        if targets and key is not None:
            self.sender = self._new_sender(key)
        self.responder: ProbeResponder | None = None
        self._responder_error: str | None = None
        self._states: dict[str, PeerPathState] = {}
        #: Per path interface that is an RDMA port's, when its port was last read not active (`time.monotonic`).
        self._rdma_down_at: dict[str, float] = {}
        #: The paths' interfaces that are RDMA ports' (their probes travel over RDMA hardware), as last read.
        self._rdma_interfaces: frozenset[str] = frozenset()

    def _skip_own_addresses(self, peers: Sequence[PeerSection], own: Collection[IpAddress]) -> tuple[PeerSection, ...]:
        """``peers`` but the entries whose path reaches this node's own agent (an alias of this node): each said once."""
        from rigmon.probes.own_paths import own_address_note, own_address_peers

        try:
            listen_port: int | None = split_listen(self.config.agent.listen)[1]
        except ValueError:
            listen_port = None
        skipped = own_address_peers(peers, self.config.probes, listen_port, own)
        self.own_address_notes = tuple(own_address_note(self.config.node_name, peer, path) for peer, path in skipped)
        for note in self.own_address_notes:
            log.info("%s", note)
        names = {peer.name for peer, _ in skipped}
        return tuple(p for p in peers if p.name not in names)

    def _new_sender(self, key: bytes) -> ProbeSender:
        from rigmon.probes.sender import ProbeSender

        probes = self.config.probes
        return ProbeSender(self.config.node_name, key, self._targets, probes.rate_hz, probes.window_s)

    def start(self, push: PushFn) -> None:
        """Bind the responder and start both threads (the sender's and the responder's)."""
        if self.sender is None or self.key is None:
            return
        self._start_responder()
        self.sender.start()

    def _start_responder(self) -> None:
        assert self.key is not None
        from rigmon.probes.responder import ProbeResponder

        probes = self.config.probes
        responder = ProbeResponder(self.config.node_name, self.key, frozenset(p.name for p in self.config.probed_peers),
                                   probes.reply_rate_per_s, probes.reply_burst, key_memory_s=probes.window_s)
        try:
            responder.bind(probes.bind, probes.port)
        except OSError as exc:
            error = f"probe responder cannot listen on {probes.bind}:{probes.port}: {exc.strerror or exc}"
            if error != self._responder_error:
                log.error("%s", error)
            self._responder_error = error
            return
        self._responder_error = None
        responder.start()
        self.responder = responder

    def collect(self) -> Sequence[object]:
        """Readings of every path over the last window, the responder's counters and state-change events.

        Raises:
            NoData: no ``[[peers]]`` configured.
            CollectorError: peers are configured but there is no probe key, or the responder
                could not bind its port (the peers' probes of this node go unanswered).
        """
        if not self._paths:
            raise NoData("no [[peers]] configured" if self._own_note is None else
                         f"no [[peers]] configured but this node ({self.config.node_name})")
        if self.sender is None:
            raise CollectorError("no probe key: set [probes] key_file, or [agent] token_file to derive it")
        if self._responder_error is not None:
            self._start_responder()  # again: the port may be free now
            if self._responder_error is not None:
                # Before the paths: their state changes are reported once the responder runs.
                raise CollectorError(self._responder_error)
        stopped = self.sender.stopped
        if stopped is not None:
            # Nothing is probed: the paths would slide to "unknown" and a silent path's alarm resolve.
            log.error("probe sender stopped (%s): starting it again", stopped)
            self.sender.close()
            self.sender = self._new_sender(self.sender.key)
            self.sender.start()
            raise CollectorError(f"probe sender stopped ({stopped}): started again, the paths read unknown "
                                 "for a window")
        started = self.sender.started_s
        # Real seconds, like the probes themselves (the simulator's clock may run faster).
        complete = started is not None and time.monotonic() - started >= self.config.probes.window_s
        probes = self.config.probes
        silent_run = silent_after(probes.rate_hz, probes.window_s)
        responder = self.responder.reading() if self.responder is not None else None
        # The peer's probes of this node refused for a bad MAC: it holds another key, so it refuses ours.
        bad_key = responder.refusing_key_from if responder is not None else ()
        rdma_down = self._rdma_down_interfaces(probes.window_s)
        if self.responder is not None:
            self.responder.rdma_down = bool(rdma_down)
        windows = self.sender.windows()
        # The peer says so on the paths that still answer (its management network's), not on those its port carries.
        peers_rdma_down = {w.target.peer for w in windows if w.peer_rdma_down}
        readings: list[PeerPathReading] = []
        for window in windows:
            section = self._paths[window.target.name]
            limit = section.p99_limit_us or probes.p99_limit_us
            state, p99_over, loss_over = judge_path(window, limit, probes.loss_limit_pct, complete, silent_run)
            s = window.stats
            readings.append(PeerPathReading(
                name=window.target.name, peer=window.target.peer, path=window.target.path,
                address=window.target.address, transport=window.target.transport, state=state,
                window_s=probes.window_s, sent=s.sent, received=s.received, loss_pct=s.loss_pct,
                rtt_p50_us=s.p50_us, rtt_p99_us=s.p99_us, rtt_max_us=s.max_us, jitter_us=s.jitter_us,
                last_reply_age_s=window.last_reply_age_s, interface=section.interface or None,
                link_gbps=self._link_gbps(section.interface), sent_total=window.sent_total,
                received_total=window.received_total, p99_limit_us=limit, loss_limit_pct=probes.loss_limit_pct,
                p99_over_limit=p99_over, loss_over_limit=loss_over, error=window.error,
                peer_flooded=window.peer_flooded, rdma_port_down=bool(section.interface) and section.interface in rdma_down,
                peer_rdma_port_down=section.interface in self._rdma_interfaces and window.target.peer in peers_rdma_down,
                key_mismatch=window.target.transport == "udp" and any(
                    same_address(window.target.address, source) for source in bad_key),
            ))
        readings = with_peer_reachable(readings)
        records: list[object] = list(path_events(self._states, readings, self.clock.time()))
        self._states.update({r.name: r.state for r in readings if r.state != "unknown"})
        records.extend(readings)
        if responder is not None:
            records.append(responder)
        return records

    def _rdma_down_interfaces(self, window_s: float) -> set[str]:
        """The paths' interfaces whose RDMA port is not active, or was not within ``window_s`` (a path is
        silent for up to a window after its port is back): their silence is the port's."""
        interfaces = {section.interface for section in self._paths.values() if section.interface}
        if not interfaces:
            return set()
        from rigmon.collectors.infiniband_netdev import rdma_interfaces

        now = time.monotonic()
        ports = rdma_interfaces(self.root)
        self._rdma_interfaces = frozenset(i for i in ports if i in interfaces)
        for interface, active in ports.items():
            if interface in interfaces and not active:
                self._rdma_down_at[interface] = now
        self._rdma_down_at = {i: at for i, at in self._rdma_down_at.items() if now - at <= window_s}
        return set(self._rdma_down_at)

    def _link_gbps(self, interface: str) -> float | None:
        if not interface or "/" in interface:
            return None
        text = self.root.read_attr(f"/sys/class/net/{interface}/speed")
        try:
            mbps = int(text) if text is not None else -1
        except ValueError:
            return None
        # The kernel reports -1 (or 4294967295) when the link is down or the driver does not know.
        return mbps / 1000.0 if 0 < mbps < 10_000_000 else None

    def close(self) -> None:
        """Stop the sender's thread and the responder."""
        if self.sender is not None:
            self.sender.close()
        if self.responder is not None:
            self.responder.close()


def make_peer_probe_collector(ctx: CollectorContext) -> PeerProbeCollector:
    """Registry factory."""
    own: frozenset[IpAddress] = frozenset()
    if ctx.config.probed_peers:
        from rigmon.hw.addresses import local_addresses

        own = local_addresses()
    return PeerProbeCollector(ctx.root, ctx.clock, ctx.config, ctx.probe_key, own)
