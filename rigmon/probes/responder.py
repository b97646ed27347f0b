"""The probe responder: a UDP echo on a small thread of the agent that answers only authenticated peers."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from rigmon.agent.ratelimit import RateLimiter
from rigmon.probes.sender import socket_address
from rigmon.probes.timestamps import (
    TIMESTAMP_DROPS_CMSG_BYTES,
    ask_kernel_drops,
    ask_kernel_time,
    kernel_drops,
    kernel_time_ns,
)
from rigmon.probes.wire import Probe, ProbeRefused, is_request, pack, parse
from rigmon.schema import ProbeResponderReading

log = logging.getLogger(__name__)

#: A request whose send time is further than this from the responder's wall clock is refused
#: (a replayed capture); generous, because the nodes' clocks may be apart.
MAX_CLOCK_SKEW_S = 300.0

_GARBLED = frozenset({"size", "magic", "version", "kind", "name"})
#: (source, reason) pairs logged once each, at most this many: a spoofed flood cannot fill the log.
_MAX_LOGGED = 64
#: What an operator should check, by reason of refusal (garbled datagrams are anyone's noise: not logged).
_HINTS = {
    "mac": "bad MAC: the probe key differs from this node's ([probes] key_file, or the [agent] read token it is "
           "derived from, must be the same on every node)",
    "peer": "its node name is not among this node's [[peers]] names",
    "stale": "its send time is more than 300 s from this node's clock (clocks apart, or a replayed capture)",
    "rate": "more datagrams than [probes] reply_rate_per_s allows one source: a flood (or a peer probing faster "
            "than this node answers); peers' probes lost meanwhile are the flood's, not the network's",
}
#: Read buffer: larger than any probe, so an oversized datagram is seen whole and refused.
_MAX_DATAGRAM = 2048
#: Share of one core the responder's thread may use in each `CPU_PERIOD_S`; past it, the thread stops
#: reading until the period ends, and the kernel drops what overflows the socket's queue (cheaply, and
#: counted: ``dropped_total``). A flood then costs this node a quarter of a core, not a core.
MAX_CPU_SHARE = 0.25
CPU_PERIOD_S = 1.0
#: Datagrams read between two looks at the thread's CPU clock.
_CPU_CHECK_EVERY = 16
#: After the last datagram refused for its source's rate, the last pause for the CPU budget or the last
#: kernel drop, the responder says it is flooded (frame and replies) this long.
FLOOD_MEMORY_S = 10.0
#: Sources whose probes were refused for a bad MAC, remembered (the most recent ones) for the frame.
MAX_KEY_SOURCES = 16


class ProbeResponder:
    """Answers probe requests: valid MAC, sender among ``peers``, fresh, within the source's rate.

    A flood is bounded before any expensive work: a datagram without a request's size, magic,
    version and kind is counted and dropped; each source then spends its budget
    (``rate_per_s``, ``burst``) before the MAC is computed, so a replayed or forged flood from
    one address costs one MAC per budgeted datagram; and the thread uses at most `MAX_CPU_SHARE`
    of a core (its own CPU clock), leaving the rest of a flood to the kernel to drop. While
    it refuses or drops datagrams beyond a budget it says so for `FLOOD_MEMORY_S` (``flooded``
    in its reading, `FLAG_FLOODED` in its replies): peers' losses meanwhile are the flood's.

    The reply has the request's size (the datagram format is fixed), so the responder never
    amplifies; a stranger (bad MAC, unknown name, any other datagram) gets no answer at all.
    Nothing a datagram holds can raise out of `datagram_received`.

    It runs on a small thread of its own (`start`), not on the agent's event loop: the loop
    stalls for milliseconds while it encodes frames and evaluates alarms. The thread still
    waits for a CPU and for Python's GIL before it reads a request (milliseconds when the
    agent is busy), so each reply says how long the request was held here, from the kernel's
    receive time (``SO_TIMESTAMPNS``) to the reply's send, and the prober takes that off its
    round trip: the peers measure the network, not this node's scheduling.

    Args:
        node: this node's name, the sender of replies.
        key: the cluster's probe key.
        peers: node names whose requests are answered.
        rate_per_s: replies per second per source address (token bucket).
        burst: replies per source address at once.
        wall_ns: wall clock in Unix nanoseconds (tests pass a fake).
        monotonic: clock of the rate limiter and of the flood's memory, in seconds.
        cpu_clock: the responder thread's CPU time in seconds (tests pass a fake).
        key_memory_s: seconds a source refused for a bad MAC stays in ``refusing_key_from``.
    """

    def __init__(self, node: str, key: bytes, peers: frozenset[str], rate_per_s: float, burst: int,
                 wall_ns: Callable[[], int] = time.time_ns, monotonic: Callable[[], float] = time.monotonic,
                 cpu_clock: Callable[[], float] = time.thread_time, key_memory_s: float = 10.0) -> None:
        self.node = node
        self.key = key
        self.peers = peers
        self.limiter = RateLimiter(rate_per_s, burst, monotonic)
        self.wall_ns = wall_ns
        self.monotonic = monotonic
        self.cpu_clock = cpu_clock
        self.key_memory_s = key_memory_s
        self.dropped_total: int | None = None
        self.paused_total = 0
        self.flood_from: str | None = None
        #: An RDMA port carrying one of this node's probed paths is down: replies say so (set by the collector;
        #: a bool is written and read whole, so no lock).
        self.rdma_down = False
        self._flood_at: float | None = None
        self._drops_seen = 0
        self._bad_key_at: OrderedDict[str, float] = OrderedDict()
        self.sock: socket.socket | None = None
        self.address = ""
        self.answered_total = 0
        self.refused: dict[str, int] = {"garbled": 0, "mac": 0, "peer": 0, "stale": 0, "rate": 0}
        self.last_refused_from: str | None = None
        self.last_refused_reason: str | None = None
        self._logged: set[tuple[str, str]] = set()
        self._sender: str | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def bind(self, host: str, port: int) -> None:
        """Open the UDP socket on ``host:port``.

        Raises:
            OSError: the port cannot be bound.
        """
        family, sockaddr = socket_address(host, port)
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.bind(sockaddr)
        except OSError:
            sock.close()
            raise
        # Wakes up to check for shutdown; a datagram wakes it at once.
        sock.settimeout(0.5)
        ask_kernel_time(sock)  # without: the hold counts from when this thread reads the request
        if ask_kernel_drops(sock):
            self.dropped_total = 0
        self.sock = sock
        bound_host, bound_port = sock.getsockname()[:2]
        self.address = f"[{bound_host}]:{bound_port}" if family == socket.AF_INET6 else f"{bound_host}:{bound_port}"

    def start(self) -> None:
        """Answer on a thread of its own until `close`."""
        self._thread = threading.Thread(target=self._run, name=f"rigmon-probe-responder-{self.node}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        sock = self.sock
        assert sock is not None
        period_end = self.monotonic() + CPU_PERIOD_S
        cpu_at_start = self.cpu_clock()
        read = 0
        while not self._stop.is_set():
            try:
                data, ancdata, _, addr = sock.recvmsg(_MAX_DATAGRAM, TIMESTAMP_DROPS_CMSG_BYTES)
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                continue  # ICMP errors from a prober that went away
            self._count_drops(kernel_drops(ancdata))
            self.datagram_received(data, addr, kernel_time_ns(ancdata))
            read += 1
            if read % _CPU_CHECK_EVERY:
                continue
            now = self.monotonic()
            if now >= period_end:
                period_end, cpu_at_start = now + CPU_PERIOD_S, self.cpu_clock()
            elif self.cpu_clock() - cpu_at_start > MAX_CPU_SHARE * CPU_PERIOD_S:
                # The budget is spent: the rest of the flood waits in (and overflows) the kernel's queue.
                self.paused_total += 1
                self._flood_at = now
                self._stop.wait(period_end - now)

    def _count_drops(self, drops: int | None) -> None:
        if drops is None or drops == self._drops_seen:
            return
        self.dropped_total = (self.dropped_total or 0) + (drops - self._drops_seen) % 2**32
        self._drops_seen = drops
        self._flood_at = self.monotonic()

    @property
    def flooded(self) -> bool:
        """Whether datagrams beyond a budget were refused or dropped within the last `FLOOD_MEMORY_S`."""
        return self._flood_at is not None and self.monotonic() - self._flood_at < FLOOD_MEMORY_S

    def datagram_received(self, data: bytes, addr: tuple[str | object, ...], arrived_ns: int | None = None) -> None:
        """Answer or refuse one datagram (never raises).

        Args:
            data: the datagram.
            addr: its source address.
            arrived_ns: when the kernel received it, Unix ns (``None``: now).
        """
        source = str(addr[0])
        if arrived_ns is None:
            arrived_ns = time.time_ns()
        try:
            reason = self._answer(data, addr, arrived_ns)
        except Exception:  # noqa: BLE001 - a datagram must never take the responder down
            log.exception("probe responder: datagram from %s", source)
            reason = "garbled"
        if reason is not None:
            self.refused[reason] += 1
            self.last_refused_from = source
            self.last_refused_reason = reason
            if reason == "rate":
                self.flood_from = source
                self._flood_at = self.monotonic()
            elif reason == "mac":
                self._bad_key_at.pop(source, None)
                self._bad_key_at[source] = self.monotonic()
                if len(self._bad_key_at) > MAX_KEY_SOURCES:
                    self._bad_key_at.popitem(last=False)
            if reason in _HINTS and (source, reason) not in self._logged and len(self._logged) < _MAX_LOGGED:
                # Once per source and reason: the prober's end only sees a silent path.
                self._logged.add((source, reason))
                sender = f" (node {self._sender!r})" if self._sender is not None and reason != "mac" else ""
                log.warning("probe responder %s: refusing probes from %s%s: %s; counted in "
                            "readings.probe_responder", self.node, source, sender, _HINTS[reason])

    def _answer(self, data: bytes, addr: tuple[str | object, ...], arrived_ns: int) -> str | None:
        self._sender = None
        if not is_request(data):
            return "garbled"
        # The source's budget before the MAC: a flood from one address costs one MAC per budgeted datagram.
        if self.limiter.take(str(addr[0])) is not None:
            return "rate"
        try:
            probe = parse(data, self.key)
        except ProbeRefused as exc:
            return "garbled" if exc.reason in _GARBLED else "mac"
        self._sender = probe.sender
        if probe.sender not in self.peers:
            return "peer"
        if abs(self.wall_ns() - probe.sent_at_ns) > MAX_CLOCK_SKEW_S * 1e9:
            return "stale"
        # Real time, like the kernel's stamp (``wall_ns`` may be a test's fake clock).
        held_ns = max(0, time.time_ns() - arrived_ns)
        reply = pack(Probe("reply", self.node, probe.seq, 0, held_ns, self.flooded, self.rdma_down), self.key)
        if len(reply) > len(data) or self.sock is None:  # never: the format is fixed; kept as the rule
            return "garbled"
        try:
            self.sock.sendto(reply, addr)
        except OSError:
            return None  # the prober went away; not the requester's fault
        self.answered_total += 1
        return None

    def reading(self) -> ProbeResponderReading:
        """Counters since start, as a record for the frame."""
        r = self.refused
        now = self.monotonic()
        bad_key = tuple(source for source, at in self._bad_key_at.items() if now - at < self.key_memory_s)
        return ProbeResponderReading(
            address=self.address, answered_total=self.answered_total, refused_garbled_total=r["garbled"],
            refused_mac_total=r["mac"], refused_peer_total=r["peer"], refused_stale_total=r["stale"],
            refused_rate_total=r["rate"], last_refused_from=self.last_refused_from,
            last_refused_reason=self.last_refused_reason, flooded=self.flooded, flood_from=self.flood_from,
            dropped_total=self.dropped_total, paused_total=self.paused_total, refusing_key_from=bad_key,
        )

    def close(self) -> None:
        """Stop answering and close the socket."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        if self.sock is not None:
            self.sock.close()
