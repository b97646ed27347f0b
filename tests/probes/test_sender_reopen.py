"""A thunderbolt-net path by its link-local address (``fe80::2%thunderbolt0``) whose interface is not there
when the agent starts, or comes back as a new interface (a re-plugged USB4 cable, the peer rebooted): the
sender opens its socket again once the address names somewhere to send, instead of reading silent for ever.

``thunderbolt0`` exists only while the two hosts are connected, and cannot be made in a test: the address is
resolved through `rigmon.probes.sender.socket_address`, here answering as the kernel would (no such zone,
then the new interface's scope id), with a real responder on 127.0.0.1 standing for the peer.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

import pytest

from rigmon.probes import sender as sender_module
from rigmon.probes.responder import ProbeResponder
from rigmon.probes.sender import PathTarget, ProbeSender
from tests.probes.test_sender import KEY

ADDRESS = "fe80::2%thunderbolt0"


async def _until(check: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


def _closed_port() -> int:
    """A UDP port on 127.0.0.1 nothing listens on (the old interface's scope id: nothing answers there)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


@pytest.fixture
def peer() -> ProbeResponder:
    responder = ProbeResponder("node02", KEY, frozenset({"node01"}), 1000.0, 1000)
    responder.bind("127.0.0.1", 0)
    responder.start()
    yield responder
    responder.close()


async def test_a_path_whose_interface_appears_after_the_start_is_probed_once_it_is_there(
        monkeypatch: pytest.MonkeyPatch, peer: ProbeResponder) -> None:
    assert peer.sock is not None
    port = peer.sock.getsockname()[1]
    interface_up = False

    def resolve(address: str, _port: int) -> tuple[socket.AddressFamily, tuple[str, int]]:
        assert address == ADDRESS
        if not interface_up:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")  # no such zone yet
        return socket.AF_INET, ("127.0.0.1", port)

    monkeypatch.setattr(sender_module, "socket_address", resolve)
    sender = ProbeSender("node01", KEY, [PathTarget("node02", "tbnet", ADDRESS, 9872)], rate_hz=20.0, window_s=2.0)
    sender.start()
    try:
        await _until(lambda: sender.windows()[0].sent_total >= 5)
        (window,) = sender.windows()
        assert window.received_total == 0 and "cannot open a socket" in (window.error or ""), window
        interface_up = True  # the peer booted: thunderbolt0 is there now
        await _until(lambda: sender.windows()[0].received_total >= 5)
        (window,) = sender.windows()
        assert window.received_total >= 5, window
        assert window.error is None, window
    finally:
        sender.close()


@pytest.mark.parametrize("old_place", ["refuses", "swallows"])
async def test_a_path_whose_interface_came_back_as_another_is_probed_there(
        monkeypatch: pytest.MonkeyPatch, peer: ProbeResponder, old_place: str) -> None:
    """The old interface's scope id: sends there fail (``refuses``: an error on the socket), or go
    nowhere without a word (``swallows``: a socket that never answers)."""
    assert peer.sock is not None
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    now_at = ("127.0.0.1", _closed_port()) if old_place == "refuses" else sink.getsockname()

    def resolve(address: str, _port: int) -> tuple[socket.AddressFamily, tuple[str, int]]:
        return socket.AF_INET, now_at

    monkeypatch.setattr(sender_module, "socket_address", resolve)
    sender = ProbeSender("node01", KEY, [PathTarget("node02", "tbnet", ADDRESS, 9872)], rate_hz=20.0, window_s=2.0)
    sender.start()
    try:
        await _until(lambda: sender.windows()[0].sent_total >= 10)
        assert sender.windows()[0].received_total == 0
        now_at = peer.sock.getsockname()  # re-plugged: the same name, another interface
        await _until(lambda: sender.windows()[0].received_total >= 5)
        (window,) = sender.windows()
        assert window.received_total >= 5, window
    finally:
        sender.close()
        sink.close()
