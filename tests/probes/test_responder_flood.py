"""The probe responder under a flood, over real UDP on 127.0.0.1: bounded work, and it says it is flooded."""

from __future__ import annotations

import itertools
import math
import os
import socket
import subprocess
import sys
import time

import pytest

from rigmon.probes import responder as responder_module
from rigmon.probes.responder import CPU_PERIOD_S, MAX_CPU_SHARE, ProbeResponder
from rigmon.probes.wire import SIZE, Probe, derive_key, pack, parse

KEY = derive_key("cluster-token")


def _request(seq: int = 1, key: bytes = KEY) -> bytes:
    return pack(Probe("request", "node01", seq, time.time_ns()), key)


def _sink(host: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((host, 0))
    sock.settimeout(2.0)
    return sock


@pytest.mark.parametrize("flood", ["replayed", "forged", "garbage"])
def test_a_flood_from_one_address_costs_a_mac_per_budgeted_datagram_and_is_said(
        flood: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A replayed valid request, a forged one (another key) or garbage, 1000 times from one address:
    the MAC is computed for the source's burst at most (garbage: never), a real peer on another address
    is still answered, and its reply and the reading say the port is flooded (for a replay or a forgery;
    garbage costs a length and magic check, and is only counted)."""
    parsed: list[int] = []
    real_parse = responder_module.parse

    def counting_parse(data: bytes, key: bytes) -> Probe:
        parsed.append(1)
        return real_parse(data, key)

    monkeypatch.setattr(responder_module, "parse", counting_parse)
    now = [100.0]
    responder = ProbeResponder("node02", KEY, frozenset({"node01"}), 10.0, 20, monotonic=lambda: now[0])
    responder.bind("127.0.0.1", 0)
    flooder, peer = _sink("127.0.0.1"), _sink("127.0.0.2")
    try:
        datagram = {"replayed": _request(), "forged": _request(key=derive_key("a guess")),
                    "garbage": os.urandom(SIZE)}[flood]
        for _ in range(1000):
            responder.datagram_received(datagram, flooder.getsockname())
        assert len(parsed) <= 20
        reading = responder.reading()
        if flood == "garbage":
            assert (reading.refused_garbled_total, reading.flooded) == (1000, False)
            return
        assert reading.refused_rate_total >= 980
        assert (reading.flooded, reading.flood_from) == (True, "127.0.0.1")
        responder.datagram_received(_request(seq=5), peer.getsockname())
        reply = parse(peer.recv(256), KEY)
        assert (reply.seq, reply.flooded) == (5, True)
        now[0] += responder_module.FLOOD_MEMORY_S
        assert not responder.reading().flooded  # the flood is over: replies no longer say so
    finally:
        flooder.close()
        peer.close()
        responder.close()


def test_the_thread_stops_reading_once_its_cpu_budget_is_spent() -> None:
    """A CPU clock that says a whole second went by at each look: the thread reads one batch, then stops
    until the period is over (the kernel queues or drops the rest), and counts the pause."""
    cpu = itertools.count()
    frozen = 50.0
    responder = ProbeResponder("node02", KEY, frozenset({"node01"}), 1000.0, 1000, monotonic=lambda: frozen,
                               cpu_clock=lambda: float(next(cpu)))
    responder.bind("127.0.0.1", 0)
    assert responder.sock is not None
    sock = _sink("127.0.0.1")
    try:
        sock.connect(responder.sock.getsockname()[:2])
        for seq in range(40):
            sock.send(_request(seq))
        responder.start()
        replies = [parse(sock.recv(256), KEY) for _ in range(responder_module._CPU_CHECK_EVERY)]
        sock.settimeout(0.3 * CPU_PERIOD_S)
        with pytest.raises(TimeoutError):
            sock.recv(256)  # paused: the rest waits
        assert [r.seq for r in replies] == list(range(16))
        reading = responder.reading()
        assert (reading.paused_total, reading.flooded) == (1, True)
    finally:
        sock.close()
        responder.close()


def test_datagrams_the_kernel_drops_on_a_full_queue_are_counted() -> None:
    responder = ProbeResponder("node02", KEY, frozenset({"node01"}), 1e6, 1_000_000)
    responder.bind("127.0.0.1", 0)
    assert responder.sock is not None
    responder.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    sock = _sink("127.0.0.1")
    try:
        sock.connect(responder.sock.getsockname()[:2])
        for seq in range(200):
            sock.send(_request(seq))
        responder.start()
        sock.settimeout(0.5)
        got = 0
        try:
            while True:
                sock.recv(256)
                got += 1
        except TimeoutError:
            pass
        assert 0 < got < 200
        sock.send(_request(999))  # queued after the drops: it carries the kernel's count
        assert parse(sock.recv(256), KEY).flooded
        reading = responder.reading()
        assert reading.dropped_total is not None and reading.dropped_total >= 200 - got - 1
        assert reading.flooded
    finally:
        sock.close()
        responder.close()


_FLOODER = """
import socket, sys, time
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.connect(("127.0.0.1", int(sys.argv[1])))
data = bytes.fromhex(sys.argv[2])
end = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    for _ in range(100):
        try:
            sock.send(data)
        except OSError:
            pass
"""


def test_a_real_flood_takes_at_most_its_cpu_share_by_the_responder_threads_clock() -> None:
    """A flooder process replays a valid request as fast as it can. The responder thread's own CPU
    clock (not wall time) says what the flood costs: at most `MAX_CPU_SHARE` of each period it touched
    (before: all the core it could get). It says it is flooded, and by whom."""
    responder = ProbeResponder("node02", KEY, frozenset({"node01"}), 200.0, 100)
    responder.bind("127.0.0.1", 0)
    assert responder.sock is not None
    responder.start()
    assert responder._thread is not None and responder._thread.ident is not None
    clock = time.pthread_getcpuclockid(responder._thread.ident)
    port = responder.sock.getsockname()[1]
    try:
        cpu0, wall0 = time.clock_gettime(clock), time.monotonic()
        subprocess.run([sys.executable, "-c", _FLOODER, str(port), _request().hex(), "2.0"], check=True,
                       timeout=60)
        cpu_s, wall_s = time.clock_gettime(clock) - cpu0, time.monotonic() - wall0
        periods = math.ceil(wall_s / CPU_PERIOD_S) + 1
        assert cpu_s <= MAX_CPU_SHARE * CPU_PERIOD_S * periods + 0.05, (cpu_s, wall_s)
        reading = responder.reading()
        assert reading.flooded and reading.flood_from == "127.0.0.1"
        assert reading.refused_rate_total > 0
    finally:
        responder.close()
