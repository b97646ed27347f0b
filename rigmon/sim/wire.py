"""The simulated wire: UDP relays on 127.0.0.1 that carry real probe datagrams between simulated nodes
with each path's delay, jitter and loss, and silence a path at a scheduled time.

One relay per directed path (``node02 -> node03`` over ``roce``): the prober of the source
node sends to the relay's port, the relay forwards to the destination node's responder after
the path's delay, and sends the reply back to the prober. Nothing here writes a reading: the
agents measure the datagrams that really travel. A path whose interface has no carrier at either
end (the ``carrier`` file of the nodes' simulated sysfs trees, as their agents read it: an RDMA
port that went down takes its netdev with it) carries nothing, like a dead port.

All relays share one thread with its own ``select()``: asyncio's epoll loop sleeps in whole
milliseconds, which would turn a 12 us RDMA-like delay into a millisecond; ``select()``
takes microseconds and the thread asks the kernel for 1 us timer slack. The rig runs that
thread in a child process (``start(own_process=True)``): on a thread of the rig's process it
waited for the GIL behind four agents' threads on both legs of every round trip. The round
trip an agent measures is the configured delay plus the kernels' loopback and the relay's
wake-ups (tens of microseconds at the p50; milliseconds at the p99 on a busy machine, waiting
for a CPU; `benchmarks/tp_rtt_breakdown.py`). The wake-up on the request leg is taken out of
the path's delay where the delay is longer; the responders' own waits are taken off by the
probers, as between real nodes (a reply says how long its responder held the request).
"""

from __future__ import annotations

import ctypes
import heapq
import logging
import os
import pickle
import random
import selectors
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rigmon.probes.select_loop import SelectThread
from rigmon.probes.timestamps import TIMESTAMP_CMSG_BYTES, ask_kernel_time, kernel_time_ns

log = logging.getLogger(__name__)

_PR_SET_TIMERSLACK = 29
_MAX_DATAGRAM = 2048
#: Real seconds between reads of the interfaces' carrier in the nodes' trees: half a physics
#: step (`rigmon.sim.rig.STEP_REAL_S`), so a link that went down stops passing datagrams within
#: about one tree write of the agents seeing it down, at a few hundred small reads a second.
CARRIER_POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class WirePath:
    """One path between two nodes (both directions) and how it behaves.

    Attributes:
        a, b: node indices (from 0).
        path: path name (``roce``, ``tbnet``, ``mgmt``).
        delay_us: round-trip time the wire adds, in microseconds.
        jitter_us: the added time varies uniformly by up to this much either way (never below 0).
        loss: probability that a request is dropped (0..1).
        silent_from_s, silent_until_s: simulated seconds between which every datagram is dropped.
        interface: the nodes' local interface carrying the path (reported with the path); while
            either node's tree says it has no carrier, the path drops everything.
        p99_limit_us: the path's p99 limit in the agents' configuration.
    """

    a: int
    b: int
    path: str
    delay_us: float
    jitter_us: float = 0.0
    loss: float = 0.0
    silent_from_s: float | None = None
    silent_until_s: float | None = None
    interface: str = ""
    p99_limit_us: float | None = None

    def silent_at(self, t_s: float) -> bool:
        """Whether the path drops everything at simulated time ``t_s``."""
        if self.silent_from_s is None or t_s < self.silent_from_s:
            return False
        return self.silent_until_s is None or t_s < self.silent_until_s


class _Relay:
    """One direction of a path: a front socket the prober talks to, a back socket towards the responder."""

    def __init__(self, wire_path: WirePath, src: int, dst: int,
                 sockets: tuple[socket.socket, socket.socket] | None = None) -> None:
        self.path = wire_path
        self.src = src
        self.dst = dst
        if sockets is not None:  # the child process of `SimWire.start`: the parent's, bound and set up
            self.front, self.back = sockets
        else:
            self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.front.bind(("127.0.0.1", 0))
            self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.back.bind(("127.0.0.1", 0))
        for sock in (self.front, self.back):
            sock.setblocking(False)
            ask_kernel_time(sock)
        self.port: int = self.front.getsockname()[1]
        self.target: tuple[str, int] | None = None
        self.client: tuple[str, int] | None = None
        self.forwarded = 0
        self.dropped = 0

    def close(self) -> None:
        self.front.close()
        self.back.close()


class SimWire:
    """The relays of every path, in both directions, on one thread (of this process or of a child).

    Args:
        paths: the paths between nodes.
        now_s: simulated seconds since the scenario started (silence is scheduled on it).
        seed: makes the dropped datagrams and the jitter repeatable.
        roots: each node's simulated root (by node index): a path is down while its interface's
            ``sys/class/net/<interface>/carrier`` reads 0 there. Without them (or without the
            file: no such NIC simulated) paths do not go down.
    """

    def __init__(self, paths: list[WirePath], now_s: Callable[[], float], seed: int = 1,
                 roots: list[Path] | None = None) -> None:
        self.paths = paths
        self.now_s = now_s
        self.roots = list(roots or [])
        #: Interfaces (node, name) whose carrier was 0 at the last poll.
        self.no_carrier: set[tuple[int, str]] = set()
        self._carrier_due = 0.0
        self.rng = random.Random(f"wire:{seed}")
        self.relays: list[_Relay] = []
        for p in paths:
            self.relays.append(_Relay(p, p.a, p.b))
            self.relays.append(_Relay(p, p.b, p.a))
        self._loop = SelectThread(selectors.SelectSelector())
        self._selector = self._loop.selector
        self._heap: list[tuple[int, int, socket.socket, bytes, tuple[str, int]]] = []
        self._order = 0
        self._child: subprocess.Popen[bytes] | None = None

    def relay_port(self, src: int, dst: int, path: str) -> int:
        """Port on 127.0.0.1 node ``src`` sends its probes of ``path`` to ``dst`` to."""
        return next(r.port for r in self.relays if (r.src, r.dst, r.path.path) == (src, dst, path))

    def set_responder(self, node: int, port: int) -> None:
        """Where node ``node``'s responder listens (127.0.0.1)."""
        for r in self.relays:
            if r.dst == node:
                r.target = ("127.0.0.1", port)

    def peers_config(self, node: int, names: list[str]) -> list[dict[str, object]]:
        """The ``[[peers]]`` of node ``node``: every path to every other node, through the relays."""
        peers: dict[int, list[dict[str, object]]] = {}
        for r in self.relays:
            if r.src != node:
                continue
            path: dict[str, object] = {"name": r.path.path, "address": "127.0.0.1", "port": r.port}
            if r.path.interface:
                path["interface"] = r.path.interface
            if r.path.p99_limit_us is not None:
                path["p99_limit_us"] = r.path.p99_limit_us
            peers.setdefault(r.dst, []).append(path)
        return [{"name": names[dst], "paths": paths} for dst, paths in sorted(peers.items())]

    def start(self, own_process: bool = False) -> None:
        """Start the relays' thread.

        Args:
            own_process: run it in a child Python process (`serve_child`) with a GIL of its own,
                so that the relays do not wait for this process's threads (four agents in the
                simulator) and add that wait to every round trip, as a real wire would not.
                ``now_s`` must then pickle: a `SimClock`'s ``elapsed`` does (CLOCK_MONOTONIC is
                the same in both processes). The relays' counters then stay in the child.
        """
        if own_process:
            self._start_child()
            return
        self._register()
        self._loop.start(self._run, "rigmon-sim-wire")

    def _register(self) -> None:
        for r in self.relays:
            self._selector.register(r.front, selectors.EVENT_READ, (r, True))
            self._selector.register(r.back, selectors.EVENT_READ, (r, False))

    def _start_child(self) -> None:
        fds = [fd for r in self.relays for fd in (r.front.fileno(), r.back.fileno())]
        spec = pickle.dumps((self.now_s, self.rng, self.roots,
                             [(r.path, r.src, r.dst, r.target) for r in self.relays]))
        env = dict(os.environ)
        # The child imports this package from where this process did (a test run's tree, not an installed copy).
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[2]),
                                                        env.get("PYTHONPATH", "")) if p)
        self._child = subprocess.Popen(
            [sys.executable, "-c", "import sys; from rigmon.sim.wire import serve_child; serve_child(sys.argv[1:])",
             *map(str, fds)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=fds, env=env)
        assert self._child.stdin is not None and self._child.stdout is not None
        self._child.stdin.write(struct.pack(">I", len(spec)) + spec)
        self._child.stdin.flush()
        # Relaying once this returns, like the thread: a datagram sent now is not left waiting for an import.
        if self._child.stdout.readline() != b"ready\n":
            self._child.kill()
            raise RuntimeError(f"the simulated wire's process did not start (exit code {self._child.wait()})")

    def close(self) -> None:
        """Stop the thread (or the child process) and close every socket."""
        if self._child is not None:
            assert self._child.stdin is not None
            self._child.stdin.close()  # the child's signal to stop
            try:
                self._child.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait()
            if self._child.stdout is not None:
                self._child.stdout.close()
        self._loop.join()
        for r in self.relays:
            r.close()
        self._loop.close()

    def _run(self) -> None:
        try:
            # Wake up within a microsecond of the timeout, not the default 50 us (Linux; best effort).
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_TIMERSLACK, 1000, 0, 0, 0)
        except (OSError, AttributeError):
            pass
        while not self._loop.stop.is_set():
            timeout = None
            if self._heap:
                timeout = max(0.0, (self._heap[0][0] - time.perf_counter_ns()) / 1e9)
            if self.roots:
                self._poll_carriers()
                timeout = max(0.0, min(timeout if timeout is not None else CARRIER_POLL_S,
                                       self._carrier_due - time.monotonic()))
            for key, _ in self._selector.select(timeout):
                if key.data is None:
                    return
                relay, front = key.data
                self._receive(relay, front)
            now_ns = time.perf_counter_ns()
            while self._heap and self._heap[0][0] <= now_ns:
                _, _, sock, data, addr = heapq.heappop(self._heap)
                try:
                    sock.sendto(data, addr)
                except OSError:
                    pass

    def _poll_carriers(self) -> None:
        """Re-read every path's interface carrier in both nodes' trees, when `CARRIER_POLL_S` has passed."""
        now = time.monotonic()
        if now < self._carrier_due:
            return
        self._carrier_due = now + CARRIER_POLL_S
        down: set[tuple[int, str]] = set()
        for key in {(n, p.interface) for p in self.paths for n in (p.a, p.b) if p.interface and n < len(self.roots)}:
            node, interface = key
            try:
                text = (self.roots[node] / "sys" / "class" / "net" / interface / "carrier").read_text()
            except OSError:  # no such NIC in the tree (or between a write's rename and ours): nothing went down
                continue
            if text.strip() == "0":
                down.add(key)
        self.no_carrier = down

    def link_down(self, wire_path: WirePath) -> bool:
        """Whether either end's interface of ``wire_path`` had no carrier at the last poll."""
        return bool(self.no_carrier) and ((wire_path.a, wire_path.interface) in self.no_carrier
                                          or (wire_path.b, wire_path.interface) in self.no_carrier)

    def _receive(self, relay: _Relay, front: bool) -> None:
        sock = relay.front if front else relay.back
        for _ in range(64):
            try:
                data, ancdata, _, addr = sock.recvmsg(_MAX_DATAGRAM, TIMESTAMP_CMSG_BYTES)
            except (BlockingIOError, OSError):
                return
            self._relay(relay, front, data, addr, kernel_time_ns(ancdata))

    def _relay(self, relay: _Relay, front: bool, data: bytes, addr: tuple[str, int], arrived_ns: int | None) -> None:
        """Forward, delay or drop one datagram that arrived in the kernel at ``arrived_ns`` (Unix ns; a
        reply's is not needed to forward it, and stamped to measure the wire's own wait)."""
        # A dead port carries nothing, either way: a request or a reply on it is lost.
        if relay.path.silent_at(self.now_s()) or self.link_down(relay.path):
            relay.dropped += 1
            return
        if front:
            relay.client = addr
            if relay.target is None or self.rng.random() < relay.path.loss:
                relay.dropped += 1
                return
            jitter = self.rng.uniform(-relay.path.jitter_us, relay.path.jitter_us)
            delay_ns = int(max(0.0, relay.path.delay_us + jitter) * 1000)
            # Count the delay from the datagram's arrival in the kernel: the time this thread
            # took to read it (waiting for the GIL) is part of the delay, not added to it.
            late_ns = max(0, time.time_ns() - (arrived_ns or time.time_ns()))
            self._push(time.perf_counter_ns() + delay_ns - late_ns, relay.back, data, relay.target)
            relay.forwarded += 1
        elif relay.client is not None:
            # Replies go straight back: the path's whole delay was added to the request.
            try:
                relay.front.sendto(data, relay.client)
            except OSError:
                pass

    def _push(self, due_ns: int, sock: socket.socket, data: bytes, addr: tuple[str, int]) -> None:
        if due_ns <= time.perf_counter_ns():
            try:
                sock.sendto(data, addr)
            except OSError:
                pass
            return
        self._order += 1
        heapq.heappush(self._heap, (due_ns, self._order, sock, data, addr))


def serve_child(fds: list[str]) -> None:
    """The child process of ``SimWire.start(own_process=True)``: run the relays until stdin closes.

    Reads the wire's clock, random state and relays (pickled, length first) from stdin; the
    relays' sockets are the parent's, inherited as file descriptors ``fds`` (front, back, ...).
    Says ``ready`` on stdout once it relays; the parent closing the pipe (or dying) ends it.
    """
    stdin = sys.stdin.buffer
    (size,) = struct.unpack(">I", stdin.read(4))
    now_s, rng, roots, relays = pickle.loads(stdin.read(size))
    wire = SimWire([], now_s, roots=roots)
    wire.rng = rng
    numbers = iter(int(fd) for fd in fds)
    for wire_path, src, dst, target in relays:
        front, back = (socket.socket(fileno=next(numbers)) for _ in range(2))
        relay = _Relay(wire_path, src, dst, (front, back))
        relay.target = target
        wire.relays.append(relay)
        if wire_path not in wire.paths:
            wire.paths.append(wire_path)
    wire._register()
    wire._selector.register(stdin.fileno(), selectors.EVENT_READ, None)  # readable: closed, stop
    sys.stdout.buffer.write(b"ready\n")
    sys.stdout.buffer.flush()
    try:
        wire._run()
    finally:
        for r in wire.relays:
            r.close()


#: Where the kernel's ephemeral ports are when ``/proc/sys/net/ipv4/ip_local_port_range`` cannot
#: be read (Linux's default).
_EPHEMERAL_DEFAULT = (32768, 60999)
#: Ports `free_udp_port` handed out in this process: a rig's next node must not get the same one
#: before the first node's agent has bound it.
_HANDED_OUT: set[int] = set()


def ephemeral_ports(text: str | None) -> tuple[int, int]:
    """The kernel's ephemeral port range from ``ip_local_port_range``'s text (`_EPHEMERAL_DEFAULT` if bad)."""
    try:
        low, high = (int(part) for part in (text or "").split())
    except ValueError:
        return _EPHEMERAL_DEFAULT
    return (low, high) if 0 < low <= high <= 65535 else _EPHEMERAL_DEFAULT


def free_udp_port(rng: random.Random | None = None) -> int:
    """A UDP port on 127.0.0.1 free right now, for a simulated node's responder, chosen outside the
    kernel's ephemeral range: the agent binds it later, and meanwhile a socket bound to port 0 (a
    prober's, a relay's, another test's) would be given a port just freed inside the range (seen in
    CI: "probe responder cannot listen ... Address already in use", and a node's paths all silent).
    Outside it, only an explicit bind can take it."""
    try:
        text: str | None = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
    except OSError:
        text = None
    low, high = ephemeral_ports(text)
    # Below the range if there is room (ports under 10000 are services'), else above it.
    spans = [span for span in (range(10000, low), range(high + 1, 65536)) if len(span) >= 1000]
    rng = rng or random.Random()
    for _ in range(200 if spans else 0):
        port = rng.choice(rng.choice(spans))
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    # No room outside the range (a kernel set to hand out nearly every port): any free one.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
