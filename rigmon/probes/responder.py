"""The probe responder: a UDP echo in the agent's event loop that answers only authenticated peers."""

from __future__ import annotations

import asyncio
import logging
import time
import typing
from collections.abc import Callable

from rigmon.agent.ratelimit import RateLimiter
from rigmon.probes.wire import Probe, ProbeRefused, pack, parse
from rigmon.schema import ProbeResponderReading

log = logging.getLogger(__name__)

#: A request whose send time is further than this from the responder's wall clock is refused
#: (a replayed capture); generous, because the nodes' clocks may be apart.
MAX_CLOCK_SKEW_S = 300.0

_GARBLED = frozenset({"size", "magic", "version", "kind", "name"})


class ProbeResponder(asyncio.DatagramProtocol):
    """Answers probe requests: valid MAC, sender among ``peers``, fresh, within the source's rate.

    The reply has the request's size (the datagram format is fixed), so the responder never
    amplifies; a stranger (bad MAC, unknown name, any other datagram) gets no answer at all.
    Nothing a datagram holds can raise out of `datagram_received`.

    Args:
        node: this node's name, the sender of replies.
        key: the cluster's probe key.
        peers: node names whose requests are answered.
        rate_per_s: replies per second per source address (token bucket).
        burst: replies per source address at once.
        wall_ns: wall clock in Unix nanoseconds (tests pass a fake).
        monotonic: clock of the rate limiter in seconds.
    """

    def __init__(self, node: str, key: bytes, peers: frozenset[str], rate_per_s: float, burst: int,
                 wall_ns: Callable[[], int] = time.time_ns, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.node = node
        self.key = key
        self.peers = peers
        self.limiter = RateLimiter(rate_per_s, burst, monotonic)
        self.wall_ns = wall_ns
        self.transport: asyncio.DatagramTransport | None = None
        self.address = ""
        self.answered_total = 0
        self.refused: dict[str, int] = {"garbled": 0, "mac": 0, "peer": 0, "stale": 0, "rate": 0}
        self.last_refused_from: str | None = None
        self.last_refused_reason: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast(asyncio.DatagramTransport, transport)
        host, port = transport.get_extra_info("sockname")[:2]
        self.address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def datagram_received(self, data: bytes, addr: tuple[str | object, ...]) -> None:
        source = str(addr[0])
        try:
            reason = self._answer(data, addr)
        except Exception:  # noqa: BLE001 - a datagram must never take the agent's loop down
            log.exception("probe responder: datagram from %s", source)
            reason = "garbled"
        if reason is not None:
            self.refused[reason] += 1
            self.last_refused_from = source
            self.last_refused_reason = reason

    def _answer(self, data: bytes, addr: tuple[str | object, ...]) -> str | None:
        try:
            probe = parse(data, self.key)
        except ProbeRefused as exc:
            return "garbled" if exc.reason in _GARBLED else "mac"
        if probe.kind != "request":
            return "garbled"
        if probe.sender not in self.peers:
            return "peer"
        if abs(self.wall_ns() - probe.sent_at_ns) > MAX_CLOCK_SKEW_S * 1e9:
            return "stale"
        if self.limiter.take(str(addr[0])) is not None:
            return "rate"
        reply = pack(Probe("reply", self.node, probe.seq, probe.sent_at_ns), self.key)
        if len(reply) > len(data) or self.transport is None:  # never: the format is fixed; kept as the rule
            return "garbled"
        self.transport.sendto(reply, addr)
        self.answered_total += 1
        return None

    def error_received(self, exc: Exception) -> None:
        # ICMP port unreachable from a prober that went away: nothing to do.
        log.debug("probe responder: %s", exc)

    def reading(self) -> ProbeResponderReading:
        """Counters since start, as a record for the frame."""
        r = self.refused
        return ProbeResponderReading(
            address=self.address, answered_total=self.answered_total, refused_garbled_total=r["garbled"],
            refused_mac_total=r["mac"], refused_peer_total=r["peer"], refused_stale_total=r["stale"],
            refused_rate_total=r["rate"], last_refused_from=self.last_refused_from,
            last_refused_reason=self.last_refused_reason,
        )

    def close(self) -> None:
        """Stop listening."""
        if self.transport is not None:
            self.transport.close()


async def start_responder(responder: ProbeResponder, host: str, port: int) -> ProbeResponder:
    """Bind ``responder`` to ``host:port`` (UDP) on the running loop.

    Raises:
        OSError: the port cannot be bound.
    """
    loop = asyncio.get_running_loop()
    await loop.create_datagram_endpoint(lambda: responder, local_addr=(host, port))
    return responder
