"""The probe responder over real UDP on 127.0.0.1 (its own thread): strangers get nothing, peers a reply no
bigger than asked."""

from __future__ import annotations

import asyncio
import os
import socket
import time

import pytest

from rigmon.probes.responder import ProbeResponder
from rigmon.probes.wire import SIZE, Probe, derive_key, pack, parse

KEY = derive_key("cluster-token")


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def _responder(rate_per_s: float = 1000.0, burst: int = 1000, monotonic: _Clock | None = None
                     ) -> tuple[ProbeResponder, tuple[str, int]]:
    responder = ProbeResponder("node02", KEY, frozenset({"node01"}), rate_per_s, burst,
                               monotonic=monotonic or time.monotonic)
    responder.bind("127.0.0.1", 0)
    responder.start()
    assert responder.sock is not None
    host, port = responder.sock.getsockname()[:2]
    assert responder.address == f"127.0.0.1:{port}"
    return responder, (host, port)


async def _exchange(addr: tuple[str, int], datagrams: list[bytes], wait_s: float = 0.3) -> list[bytes]:
    """Send each datagram from one socket; return every datagram that came back within ``wait_s``."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    sock.connect(addr)
    got: list[bytes] = []
    try:
        for data in datagrams:
            sock.send(data)
        deadline = loop.time() + wait_s
        while loop.time() < deadline:
            try:
                got.append(await asyncio.wait_for(loop.sock_recv(sock, 65536), deadline - loop.time()))
            except TimeoutError:
                break
    finally:
        sock.close()
    return got


def _request(sender: str = "node01", key: bytes = KEY, seq: int = 1, sent_at_ns: int | None = None) -> bytes:
    return pack(Probe("request", sender, seq, time.time_ns() if sent_at_ns is None else sent_at_ns), key)


async def test_a_valid_request_gets_one_reply_no_bigger_than_itself() -> None:
    responder, addr = await _responder()
    try:
        request = _request(seq=7)
        replies = await _exchange(addr, [request])
        assert len(replies) == 1
        assert len(replies[0]) <= len(request) == SIZE
        reply = parse(replies[0], KEY)
        assert (reply.kind, reply.sender, reply.seq) == ("reply", "node02", 7)
        assert responder.reading().answered_total == 1
    finally:
        responder.close()


@pytest.mark.parametrize(("name", "datagram", "reason"), [
    ("bad MAC", lambda: _request(key=derive_key("a stranger's guess")), "mac"),
    ("unknown peer", lambda: _request(sender="node99"), "peer"),
    ("oversized", lambda: _request() + b"\0" * 100, "garbled"),
    ("truncated", lambda: _request()[:SIZE // 2], "garbled"),
    ("random bytes", lambda: os.urandom(SIZE), "garbled"),
    ("a big random datagram", lambda: os.urandom(1400), "garbled"),
    ("empty", lambda: b"", "garbled"),
    ("a reply sent as a request", lambda: pack(Probe("reply", "node01", 1, time.time_ns()), KEY), "garbled"),
    ("replayed from long ago", lambda: _request(sent_at_ns=time.time_ns() - 3600 * 10**9), "stale"),
])
async def test_strangers_get_no_answer_and_are_counted(name: str, datagram: object, reason: str) -> None:
    responder, addr = await _responder()
    try:
        assert callable(datagram)
        replies = await _exchange(addr, [datagram()])
        assert replies == [], name
        reading = responder.reading()
        assert reading.answered_total == 0
        assert getattr(reading, f"refused_{reason}_total") == 1
        assert reading.last_refused_reason == reason
        assert reading.last_refused_from == "127.0.0.1"
    finally:
        responder.close()


async def test_garbage_never_stops_it_from_answering_the_next_valid_request() -> None:
    responder, addr = await _responder()
    try:
        junk = [os.urandom(n) for n in (0, 1, 4, 8, SIZE - 1, SIZE, SIZE + 1, 512)]
        replies = await _exchange(addr, [*junk, _request(seq=99)])
        assert [parse(r, KEY).seq for r in replies] == [99]
    finally:
        responder.close()


async def test_rate_limit_per_source() -> None:
    clock = _Clock()
    responder, addr = await _responder(rate_per_s=10.0, burst=3, monotonic=clock)
    try:
        replies = await _exchange(addr, [_request(seq=n) for n in range(10)])
        assert len(replies) == 3
        assert responder.reading().refused_rate_total == 7
        clock.now += 0.5  # five tokens back, capped at the burst of three
        replies = await _exchange(addr, [_request(seq=n) for n in range(10, 20)])
        assert len(replies) == 3
    finally:
        responder.close()


async def test_a_reply_says_how_long_the_request_waited_for_the_responder() -> None:
    """A request that waits in the socket for the responder's thread (for a CPU, for the GIL) is held
    from the kernel's receive time: the wait is the peer's scheduling, which the prober takes off."""
    responder = ProbeResponder("node02", KEY, frozenset({"node01"}), 1000.0, 1000)
    responder.bind("127.0.0.1", 0)
    assert responder.sock is not None
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(5.0)
    try:
        sock.connect(responder.sock.getsockname()[:2])
        sock.send(_request(seq=3))
        # After the send (a loopback datagram is in the responder's socket when send returns): a
        # descheduling of this thread between reading the clock and sending does not count as a wait.
        sent_ns = time.time_ns()
        await asyncio.sleep(0.2)  # the responder's thread is not running yet: the request waits
        waited_ns = time.time_ns() - sent_ns
        responder.start()
        reply = parse(sock.recv(256), KEY)
        assert (reply.kind, reply.seq) == ("reply", 3)
        assert reply.held_ns is not None and reply.held_ns >= waited_ns - 1_000_000  # the kernel stamped it at once
    finally:
        sock.close()
        responder.close()


def test_a_refusal_an_operator_can_fix_is_logged_once_per_source_and_reason(caplog: pytest.LogCaptureFixture
                                                                           ) -> None:
    """A peer with another key, a name not among [[peers]], a clock far off: the prober's end only sees a
    silent path, so the refusing end says why in its log, once per source and reason (it said nothing).
    Random bytes are anyone's noise and are only counted; so many sources cannot flood the log."""
    responder = ProbeResponder("node02", KEY, frozenset({"node01"}), 1000.0, 1000)
    caplog.set_level("WARNING", logger="rigmon.probes.responder")
    for _ in range(3):
        responder.datagram_received(_request(key=derive_key("another-token")), ("10.0.0.4", 9872))
        responder.datagram_received(_request(sender="node9"), ("10.0.0.9", 9872))
        responder.datagram_received(_request(sent_at_ns=time.time_ns() - 400 * 10**9), ("10.0.0.3", 9872))
        responder.datagram_received(os.urandom(SIZE), ("10.0.0.5", 9872))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert "10.0.0.4" in lines[0] and "probe key differs" in lines[0]
    assert "10.0.0.9 (node 'node9')" in lines[1] and "[[peers]]" in lines[1]
    assert "10.0.0.3 (node 'node01')" in lines[2] and "300 s" in lines[2]
    assert responder.refused == {"garbled": 3, "mac": 3, "peer": 3, "stale": 3, "rate": 0}
    for i in range(200):
        responder.datagram_received(_request(key=derive_key("another-token")), (f"10.1.{i}.1", 9872))
    assert len(caplog.records) <= 64
