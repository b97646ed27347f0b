"""The probe sender against a real responder on 127.0.0.1: what a round trip counts."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rigmon.probes.responder import ProbeResponder
from rigmon.probes.sender import PathTarget, ProbeSender, socket_address
from rigmon.probes.wire import derive_key

KEY = derive_key("cluster-token")


def wait_for_stamps_on_arrival() -> None:
    """Wait until the kernel stamps datagrams when they arrive, not when they are read.

    Linux turns its receive stamps on for the whole system, some time after the first socket asks
    (`SO_TIMESTAMPNS`: a deferred static key); a datagram that arrived before then is stamped when it
    is read. A responder bound just before the first probe came then counted a queued probe's wait as
    the network's (301 ms in one CI run where no other test had asked for stamps yet); an agent's
    responder binds long before its peers' first probes.
    """
    from rigmon.probes.timestamps import TIMESTAMP_CMSG_BYTES, ask_kernel_time, kernel_time_ns

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        rx.bind(("127.0.0.1", 0))
        assert ask_kernel_time(rx)
        for _ in range(200):
            tx.sendto(b"x", rx.getsockname())
            sent_ns = time.time_ns()
            time.sleep(0.005)
            _, ancdata, _, _ = rx.recvmsg(16, TIMESTAMP_CMSG_BYTES)
            stamped = kernel_time_ns(ancdata)
            if stamped is not None and stamped <= sent_ns:
                return
    raise AssertionError("the kernel never stamped a datagram on its arrival")


def pair(window_s: float) -> tuple[ProbeResponder, ProbeSender]:
    """node02's responder, bound to 127.0.0.1 but not started, and node01's sender probing it at 20 Hz."""
    responder = ProbeResponder("node02", KEY, frozenset({"node01"}), 1000.0, 1000)
    responder.bind("127.0.0.1", 0)
    wait_for_stamps_on_arrival()
    assert responder.sock is not None
    port = responder.sock.getsockname()[1]
    sender = ProbeSender("node01", KEY, [PathTarget("node02", "roce", "127.0.0.1", port)], rate_hz=20.0,
                         window_s=window_s)
    return responder, sender


async def test_the_responders_wait_before_it_reads_a_request_is_not_the_round_trip() -> None:
    """The peer's responder thread waits (here: is not started yet) while the first probes sit in its
    socket; their round trips are what the wire took, not that wait (which they once included whole)."""
    responder, sender = pair(window_s=8.0)
    sender.start()
    try:
        while sender.windows()[0].sent_total < 1:
            await asyncio.sleep(0.001)
        held_since = time.monotonic()  # the first probe went before this
        await asyncio.sleep(0.3)
        held_s = time.monotonic() - held_since  # and waits at least this long for the responder
        responder.start()
        for _ in range(500):
            if sender.windows()[0].received_total >= 10:
                break
            await asyncio.sleep(0.01)
        (window,) = sender.windows()
        assert window.received_total >= 10
        assert window.stats.max_us is not None
        # Every probe sent before the responder started (the first one for held_s and more) is in
        # the window; none of them counts its wait for the responder.
        assert window.stats.max_us < held_s * 1e6, (window.stats, held_s)
    finally:
        sender.close()
        responder.close()


async def test_a_reply_that_came_back_is_not_lost_while_the_senders_thread_has_not_read_it() -> None:
    """The sender's thread stalls (here: is stopped) while replies arrive: they sit in its socket. The
    window is read from another thread (the collector's) after the reply timeout: the replies are
    there, stamped by the kernel, and count (they once counted as lost until the thread ran)."""
    responder, sender = pair(window_s=20.0)
    sender.start()
    try:
        while sender.windows()[0].sent_total < 3:
            await asyncio.sleep(0.01)
        sender._loop.join()  # the thread stalls: nothing reads the replies
        sent = sender.windows()[0].sent_total
        responder.start()
        while responder.reading().answered_total < sent:
            await asyncio.sleep(0.01)
        await asyncio.sleep(sender.reply_timeout_s + 0.1)  # every probe is due: answered or lost
        (window,) = sender.windows()
        assert (window.stats.sent, window.stats.received, window.received_total) == (sent, sent, sent)
    finally:
        sender.close()
        responder.close()


async def _until(check: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


async def test_a_peer_whose_node_name_is_not_the_configured_one_is_said_not_just_silent() -> None:
    """node01's [[peers]] says "n02" but the peer's node name is "node02": its replies are valid but
    from another name. The path is not counted as answered, and its error says why (it read silent
    with no error, like a locked-up link)."""
    responder = ProbeResponder("node02", KEY, frozenset({"node01"}), 1000.0, 1000)
    responder.bind("127.0.0.1", 0)
    assert responder.sock is not None
    sender = ProbeSender("node01", KEY, [PathTarget("n02", "roce", "127.0.0.1", responder.sock.getsockname()[1])],
                         rate_hz=20.0, window_s=2.0)
    responder.start()
    sender.start()
    try:
        await _until(lambda: responder.reading().answered_total >= 3)
        await _until(lambda: sender.windows()[0].error is not None)
        (window,) = sender.windows()
        assert window.received_total == 0
        assert window.error is not None and "'node02'" in window.error and "'n02'" in window.error, window.error
    finally:
        sender.close()
        responder.close()


async def test_a_send_error_is_reported_while_the_window_holds_it_not_for_ever() -> None:
    """Nothing listened on the peer's port (ECONNREFUSED); then something does but does not answer
    (another key, another peer list). The error is left behind once the window no longer holds it: it
    stayed "ECONNREFUSED" until a reply came, which may be never."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    sender = ProbeSender("node01", KEY, [PathTarget("node02", "roce", "127.0.0.1", port)], rate_hz=20.0,
                         window_s=1.0)
    sender.start()
    refusing = ProbeResponder("node02", KEY, frozenset(), 1000.0, 1000)  # answers nobody
    try:
        await _until(lambda: sender.windows()[0].error is not None)
        assert "ECONNREFUSED" in (sender.windows()[0].error or "")
        refusing.bind("127.0.0.1", port)
        refusing.start()
        await asyncio.sleep(0.3)  # a refusal the kernel reported before the bind may still come up once
        await _until(lambda: sender.windows()[0].error is None, timeout_s=3.0)
        assert sender.windows()[0].error is None
        assert refusing.reading().refused_peer_total > 0  # the probes do arrive now
    finally:
        sender.close()
        refusing.close()


@pytest.mark.parametrize("transport", ["udp", "tcp"])
async def test_a_refused_path_names_the_address_and_port_it_tried(transport: str) -> None:
    """A TCP path goes to the agent's default HTTP port unless its ``port`` says otherwise: with the
    peer's agent on another port, the path read silent with ``connect: ECONNREFUSED``, naming
    neither the port tried nor the transport. The error says both."""
    kind = socket.SOCK_DGRAM if transport == "udp" else socket.SOCK_STREAM
    closed = socket.socket(socket.AF_INET, kind)
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    target = PathTarget("node02", "mgmt", "127.0.0.1", port, transport)  # type: ignore[arg-type]
    sender = ProbeSender("node01", KEY, [target], rate_hz=20.0, window_s=1.0)
    sender.start()
    try:
        await _until(lambda: sender.windows()[0].error is not None)
        error = sender.windows()[0].error or ""
        assert "ECONNREFUSED" in error and f"{transport} 127.0.0.1:{port}" in error, error
    finally:
        sender.close()


def test_an_ipv6_target_is_named_in_brackets() -> None:
    assert PathTarget("node02", "tbnet", "fe80::2%thunderbolt0", 9872).where == "udp [fe80::2%thunderbolt0]:9872"


def _link_local() -> tuple[str, str] | None:
    """A link-local IPv6 address of this machine and its interface, if it has one (/proc/net/if_inet6)."""
    try:
        lines = Path("/proc/net/if_inet6").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        hex_addr, _, _, scope, _, name = line.split()
        if scope == "20" and hex_addr.startswith("fe80"):
            return str(ipaddress.IPv6Address(bytes.fromhex(hex_addr))), name
    return None


def test_a_link_local_address_keeps_its_zone() -> None:
    """``fe80::1%lo`` is a socket address with lo's scope id (a plain tuple lost it: EINVAL at connect,
    so a thunderbolt-net path by its link-local address read silent with "cannot open a socket")."""
    family, sockaddr = socket_address("fe80::1%lo", 9872)
    assert family == socket.AF_INET6 and sockaddr == ("fe80::1", 9872, 0, socket.if_nametoindex("lo"))
    assert socket_address("10.0.0.2", 9872) == (socket.AF_INET, ("10.0.0.2", 9872))


async def test_probes_reach_a_peer_by_its_link_local_address() -> None:
    found = _link_local()
    if found is None:
        pytest.skip("no link-local IPv6 address on this machine")
    address, interface = found
    responder = ProbeResponder("node02", KEY, frozenset({"node01"}), 1000.0, 1000)
    responder.bind("::", 0)
    assert responder.sock is not None
    sender = ProbeSender("node01", KEY, [PathTarget("node02", "tbnet", f"{address}%{interface}",
                                                    responder.sock.getsockname()[1])], rate_hz=20.0, window_s=2.0)
    responder.start()
    sender.start()
    try:
        await _until(lambda: sender.windows()[0].received_total >= 3)
        (window,) = sender.windows()
        assert window.received_total >= 3, window
    finally:
        sender.close()
        responder.close()
