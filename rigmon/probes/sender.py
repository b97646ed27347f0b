"""The probe sender: one thread that sends probes on every path, matches replies and keeps each path's window."""

from __future__ import annotations

import errno
import logging
import selectors
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from rigmon.probes.select_loop import SelectThread
from rigmon.probes.stats import WindowStats, window_stats
from rigmon.probes.timestamps import TIMESTAMP_CMSG_BYTES, ask_kernel_time, kernel_time_ns
from rigmon.probes.wire import Probe, ProbeRefused, pack, parse

log = logging.getLogger(__name__)

#: A probe unanswered this long is lost (or a quarter of the window, when that is shorter).
REPLY_TIMEOUT_S = 1.0
#: Replies read per socket per wake-up, so one flooded path cannot starve the others.
_READ_BATCH = 64
#: A UDP path without a socket, whose socket failed or that has no reply for as long, looks its address
#: up again this often (a socket to it is made again only when the address names another place): a
#: link-local address's interface (``fe80::2%thunderbolt0``) is there only while the hosts are connected,
#: and comes back with another scope id after a re-plug, which the old socket does not follow.
REOPEN_EVERY_S = 1.0


def socket_address(address: str, port: int) -> tuple[socket.AddressFamily, tuple[str, int] | tuple[str, int, int, int]]:
    """The address family and socket address of a numeric IP ``address``, an IPv6 link-local one's
    zone (``fe80::1%thunderbolt0``) resolved to its scope id.

    A plain ``(address, port)`` tuple loses the zone: connecting to a link-local address without it
    fails with EINVAL, and thunderbolt-net links are often reached by their link-local addresses.

    Raises:
        OSError: not a numeric address, or an unknown zone.
    """
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    ((family, _, _, _, sockaddr),) = socket.getaddrinfo(address, port, family, socket.SOCK_DGRAM, 0,
                                                        socket.AI_NUMERICHOST)[:1]
    if isinstance(sockaddr[1], bytes):  # never for AF_INET/AF_INET6; typeshed allows it
        raise OSError(f"not an IP address: {address}")
    return family, sockaddr


@dataclass(frozen=True, slots=True)
class PathTarget:
    """One path to probe: ``<peer>/<path>`` at ``address:port`` over ``transport``."""

    peer: str
    path: str
    address: str
    port: int
    transport: Literal["udp", "tcp"] = "udp"

    @property
    def name(self) -> str:
        return f"{self.peer}/{self.path}"

    @property
    def where(self) -> str:
        """Where its probes go, as an error names it: ``tcp 10.0.0.2:9871``, ``udp [fe80::2%tb0]:9872``."""
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.transport} {host}:{self.port}"


@dataclass(slots=True)
class _Sent:
    """One probe: when it went (monotonic s) and its round trip once answered (us).

    ``start_ns`` is `time.perf_counter_ns` (TCP connects); ``start_wall_ns`` the wall clock
    just before the datagram was sent (UDP), to subtract from the kernel's receive time.
    """

    at_s: float
    seq: int
    start_ns: int
    start_wall_ns: int = 0
    rtt_us: float | None = None
    #: Its reply said the peer's responder is flooded.
    flooded: bool = False
    #: Its reply said the peer has an RDMA port down (carrying one of its probed paths).
    rdma_down: bool = False


@dataclass(slots=True)
class _Path:
    target: PathTarget
    sock: socket.socket | None = None
    #: The socket address ``sock`` is connected to.
    sockaddr: tuple[str, int] | tuple[str, int, int, int] | None = None
    #: A send or receive failed: the address is looked up again (it may name another interface now).
    recheck: bool = False
    #: When the sender's thread may next look the address up again (monotonic s).
    reopen_at_s: float = 0.0
    next_seq: int = 1
    next_send_s: float = 0.0
    window: deque[_Sent] = field(default_factory=deque)
    by_seq: dict[int, _Sent] = field(default_factory=dict)
    sent_total: int = 0
    received_total: int = 0
    last_reply_s: float | None = None
    error: str | None = None
    #: When ``error`` last happened (monotonic s): it is reported while the window holds that time.
    error_at_s: float = 0.0


@dataclass(frozen=True, slots=True)
class PathWindow:
    """What the sender knows of one path now."""

    target: PathTarget
    stats: WindowStats
    sent_total: int
    received_total: int
    last_reply_age_s: float | None
    error: str | None
    unanswered_run: int = 0
    """Probes in a row, up to the newest whose answer is due, that are unanswered: how long the path
    has been silent, whatever the rest of the window says."""
    peer_flooded: bool = False
    """A reply in the window said the peer's responder is flooded: its losses may be the flood's."""
    peer_rdma_down: bool = False
    """A reply in the window said the peer has an RDMA port down that carries one of its probed paths."""


def _unanswered_run(due: list[_Sent]) -> int:
    """Unanswered probes in a row at the end of ``due`` (in order of sending); an answered one ends the run."""
    run = 0
    for sent in reversed(due):
        if sent.rtt_us is not None:
            break
        run += 1
    return run


class ProbeSender:
    """Sends a probe on every path every ``1 / rate_hz`` s from one thread, and times replies.

    UDP probes go from one socket per path to the peer's responder; a reply counts when its
    MAC is valid, it comes from the peer the path names, and it answers a probe still waited
    for. A UDP round trip ends at the kernel's receive time of the reply (``SO_TIMESTAMPNS``),
    so it does not include this thread's wait for the GIL; without it (and for TCP paths,
    which time a connect: SYN to SYN-ACK) it ends when this thread reads the reply
    (`time.perf_counter_ns`). It starts just before the send, in this thread, after the
    packing. The time the responder says it held the request (``held_ns``, from its kernel's
    receive time to its reply) is taken off: what is left is the two kernels and the network.

    Args:
        node: this node's name, the sender in requests.
        key: the cluster's probe key.
        targets: the paths.
        rate_hz: probes per second per path.
        window_s: seconds the statistics cover.
    """

    def __init__(self, node: str, key: bytes, targets: list[PathTarget], rate_hz: float, window_s: float) -> None:
        self.node = node
        self.key = key
        self.period_s = 1.0 / rate_hz
        self.window_s = window_s
        self.reply_timeout_s = min(REPLY_TIMEOUT_S, window_s / 4)
        self.started_s: float | None = None
        self._paths = [_Path(t) for t in targets]
        self._lock = threading.Lock()
        self._loop = SelectThread(selectors.DefaultSelector())
        self._selector = self._loop.selector
        self._closed = False
        #: Why the thread ended while it should run (its select() failed, an exception), else ``None``.
        self._failure: str | None = None
        # Pending TCP connects: socket -> (path, probe).
        self._connects: dict[socket.socket, tuple[_Path, _Sent]] = {}

    def start(self) -> None:
        """Open the sockets and start the thread."""
        now = time.monotonic()
        self.started_s = now
        for index, path in enumerate(self._paths):
            # Spread the paths over one period, so the thread does not send in bursts.
            path.next_send_s = now + self.period_s * index / max(1, len(self._paths))
            if path.target.transport == "udp":
                self._open(path, now)
        self._loop.start(self._run, f"rigmon-probes-{self.node}")

    def _open(self, path: _Path, now: float) -> None:
        """Look a UDP path's address up and (re)connect its socket when it names another place than
        the socket's (or there is none); an address that names nowhere leaves the path without one.
        Called from `start` and then from the sender's thread only."""
        path.recheck = False
        path.reopen_at_s = now + REOPEN_EVERY_S
        try:
            family, sockaddr = socket_address(path.target.address, path.target.port)
        except OSError as exc:
            # No such zone: the thunderbolt-net interface is not there (the cable or the peer is not up yet).
            self._close_socket(path)
            self._fail(path, f"cannot open a socket to {path.target.address}: {exc.strerror or exc}", True)
            return
        if path.sock is not None and sockaddr == path.sockaddr:
            return
        try:
            sock = socket.socket(family, socket.SOCK_DGRAM)
            try:
                sock.setblocking(False)
                ask_kernel_time(sock)  # without: the thread's own clock ends the round trip
                sock.connect(sockaddr)
            except OSError:
                sock.close()
                raise
        except OSError as exc:
            self._close_socket(path)
            self._fail(path, f"cannot open a socket to {path.target.address}: {exc.strerror or exc}", True)
            return
        self._close_socket(path)
        path.sock, path.sockaddr = sock, sockaddr
        self._selector.register(sock, selectors.EVENT_READ, path)
        if path.error_at_s == float("inf"):
            path.error = None  # the socket could not be opened before: that is over

    def _close_socket(self, path: _Path) -> None:
        if path.sock is None:
            return
        sock, path.sock, path.sockaddr = path.sock, None, None
        self._selector.unregister(sock)
        sock.close()

    def close(self) -> None:
        """Stop the thread and close every socket."""
        self._closed = True
        self._loop.join()
        for path in self._paths:
            if path.sock is not None:
                path.sock.close()
        for sock in self._connects:
            sock.close()
        self._connects.clear()
        self._loop.close()

    def windows(self) -> list[PathWindow]:
        """Every path's statistics over the last window (probes younger than the reply timeout
        are still in flight and do not count yet).

        Replies already in the sockets are read first, with the kernel's receive time: one that
        came back in time is not lost because this sender's thread has not had a CPU or the GIL
        to read it yet (the caller's thread has them now).
        """
        if not self._closed:
            for path in self._paths:
                self._read_replies(path)
        now = time.monotonic()
        out: list[PathWindow] = []
        with self._lock:
            for path in self._paths:
                due = [s for s in path.window if now - self.window_s <= s.at_s <= now - self.reply_timeout_s
                       or (s.rtt_us is not None and s.at_s >= now - self.window_s)]
                rtts = [s.rtt_us for s in due if s.rtt_us is not None]
                age = None if path.last_reply_s is None else now - path.last_reply_s
                # An error the window no longer holds is over (a peer's port that refused is open again).
                error = path.error if path.error_at_s >= now - self.window_s else None
                out.append(PathWindow(path.target, window_stats(len(due), rtts), path.sent_total,
                                      path.received_total, age, error, _unanswered_run(due),
                                      any(s.flooded for s in due), any(s.rdma_down for s in due)))
        return out

    @property
    def stopped(self) -> str | None:
        """Why no probe goes out any more although the sender was started and not closed (its thread
        ended), else ``None``."""
        if self._closed or self.started_s is None:
            return None
        if self._failure is not None:
            return self._failure
        return None if self._loop.alive() else "its thread ended"

    def _fail(self, path: _Path, error: str, lasting: bool = False) -> None:
        path.error = error
        path.error_at_s = float("inf") if lasting else time.monotonic()

    # --- the thread ---------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._probe_until_stopped()
        except Exception as exc:  # noqa: BLE001 - said by `stopped`, the collector reports it
            log.exception("probe sender failed")
            self._failure = f"{type(exc).__name__}: {exc}"

    def _probe_until_stopped(self) -> None:
        while not self._loop.stop.is_set():
            now = time.monotonic()
            for path in self._paths:
                if now >= path.next_send_s:
                    self._send(path, now)
                    path.next_send_s += self.period_s
                    if path.next_send_s < now:  # fell behind (suspended): do not burst
                        path.next_send_s = now + self.period_s
            self._expire_connects(now)
            wait = min(p.next_send_s for p in self._paths) - time.monotonic() if self._paths else 1.0
            try:
                ready = self._selector.select(max(0.0, wait))
            except OSError as exc:
                if not self._closed:
                    self._failure = f"select failed: {exc.strerror or exc}"
                return
            for key, _ in ready:
                if key.data is None:
                    return  # woken to stop
                if isinstance(key.data, _Path):
                    self._read_replies(key.data)
                else:
                    self._finish_connect(key.fileobj)  # type: ignore[arg-type]

    def _send(self, path: _Path, now: float) -> None:
        seq = path.next_seq
        path.next_seq += 1
        sent = _Sent(now, seq, time.perf_counter_ns())
        with self._lock:
            path.window.append(sent)
            path.by_seq[seq] = sent
            path.sent_total += 1
            while path.window and path.window[0].at_s < now - self.window_s - self.reply_timeout_s:
                del path.by_seq[path.window.popleft().seq]
        if path.target.transport == "tcp":
            self._connect(path, sent)
            return
        if now >= path.reopen_at_s and (path.sock is None or path.recheck or path.last_reply_s is None
                                        or now - path.last_reply_s > REOPEN_EVERY_S):
            # Also while unanswered without an error: a send to a vanished interface may just go nowhere.
            self._open(path, now)
        if path.sock is None:
            return
        data = pack(Probe("request", self.node, seq, time.time_ns()), self.key)
        # The round trip starts here, after the packing: nothing but the send between the clock and the wire.
        sent.start_wall_ns = time.time_ns()
        sent.start_ns = time.perf_counter_ns()
        try:
            path.sock.send(data)
        except OSError as exc:
            # ECONNREFUSED (ICMP from an earlier probe), ENETUNREACH, EHOSTUNREACH: the probe is lost.
            # ENODEV & co.: the link-local address's interface went (re-plugged, it comes back as another).
            self._fail(path, _os_error(path, exc))
            path.recheck = True

    def _read_replies(self, path: _Path) -> None:
        # `windows` reads from the caller's thread too, while the sender's may replace the socket.
        sock = path.sock
        if sock is None:
            return
        for _ in range(_READ_BATCH):
            try:
                data, ancdata, _, _ = sock.recvmsg(256, TIMESTAMP_CMSG_BYTES)
            except BlockingIOError:
                return
            except OSError as exc:
                if path.sock is sock:  # not the old socket, closed for a new one meanwhile
                    self._fail(path, _os_error(path, exc))
                    path.recheck = True
                return
            end_ns = time.perf_counter_ns()
            kernel_ns = kernel_time_ns(ancdata)
            try:
                reply = parse(data, self.key)
            except ProbeRefused:
                continue
            if reply.kind != "reply":
                continue
            if reply.sender != path.target.peer:
                # Our key, the peer's address, another name: the peer's node name is not the one in
                # [[peers]]. Not counted (it may be another node), but said, or the path just reads silent.
                self._fail(path, f"replies come from node {reply.sender!r}, not {path.target.peer!r}: "
                                 "a [[peers]] name must be the peer's [agent] node name")
                continue
            self._answered(path, reply.seq, end_ns, kernel_ns, reply.held_ns, reply.flooded, reply.rdma_down)

    def _answered(self, path: _Path, seq: int, end_ns: int, kernel_ns: int | None = None,
                  held_ns: int | None = None, flooded: bool = False, rdma_down: bool = False) -> None:
        with self._lock:
            sent = path.by_seq.get(seq)
            if sent is None or sent.rtt_us is not None:
                return
            rtt_ns = end_ns - sent.start_ns
            if kernel_ns is not None and sent.start_wall_ns:
                # The kernel's arrival time: this thread may wait for the GIL before it reads
                # the reply, and that wait is not the network's. A wall clock step makes it absurd.
                by_kernel = kernel_ns - sent.start_wall_ns
                if 0 < by_kernel <= rtt_ns:
                    rtt_ns = by_kernel
            if held_ns is not None and 0 <= held_ns < rtt_ns:
                # The responder's own wait (for a CPU, for its GIL) and work between its kernel
                # receiving the request and its reply's send is not the network's either.
                rtt_ns -= held_ns
            sent.rtt_us = rtt_ns / 1000.0
            sent.flooded = flooded
            sent.rdma_down = rdma_down
            path.error = None
            path.received_total += 1
            path.last_reply_s = time.monotonic()

    def _connect(self, path: _Path, sent: _Sent) -> None:
        try:
            family, sockaddr = socket_address(path.target.address, path.target.port)
        except OSError as exc:
            self._fail(path, f"cannot connect to {path.target.address}: {exc.strerror or exc}")
            return
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        sent.start_ns = time.perf_counter_ns()
        code = sock.connect_ex(sockaddr)
        if code not in (0, errno.EINPROGRESS):
            self._fail(path, _connect_error(path, code))
            sock.close()
            return
        self._connects[sock] = (path, sent)
        self._selector.register(sock, selectors.EVENT_WRITE, "connect")

    def _finish_connect(self, sock: socket.socket) -> None:
        end_ns = time.perf_counter_ns()
        path, sent = self._connects.pop(sock)
        self._selector.unregister(sock)
        code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        sock.close()
        if code == 0:
            self._answered(path, sent.seq, end_ns)
        else:
            self._fail(path, _connect_error(path, code))

    def _expire_connects(self, now: float) -> None:
        for sock, (path, sent) in list(self._connects.items()):
            if now - sent.at_s > self.reply_timeout_s:
                del self._connects[sock]
                self._selector.unregister(sock)
                sock.close()


def _os_error(path: _Path, exc: OSError) -> str:
    """A datagram's send or receive error, naming where the path's probes go (the port a peer's
    responder does not listen on is the usual ``ECONNREFUSED``)."""
    return f"{errno.errorcode.get(exc.errno or 0, 'error')} ({path.target.where}): {exc.strerror or exc}"


def _connect_error(path: _Path, code: int) -> str:
    """A TCP path's failed connect, naming the address and port tried: the peer's agent may listen
    on another HTTP port than the default the path goes to (its ``port`` key)."""
    return f"connect {path.target.where}: {errno.errorcode.get(code, code)}"
