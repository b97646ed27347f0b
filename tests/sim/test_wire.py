"""The simulated wire: real datagrams through relays on 127.0.0.1, delayed, dropped, silenced."""

from __future__ import annotations

import random
import socket
import time
from pathlib import Path

import pytest

from rigmon.sim.clock import SimClock
from rigmon.sim.tree import Tree
from rigmon.sim.wire import CARRIER_POLL_S, SimWire, WirePath, ephemeral_ports, free_udp_port


def _echo() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.05)
    return sock


def _round_trips(wire: SimWire, echo: socket.socket, port: int, count: int) -> list[float | None]:
    """Send ``count`` datagrams through a relay to ``echo`` (answered here); round trips in seconds or None."""
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client.settimeout(0.3)
    client.connect(("127.0.0.1", port))
    out: list[float | None] = []
    try:
        for n in range(count):
            start = time.perf_counter()
            client.send(b"probe %d" % n)
            try:
                data, addr = echo.recvfrom(64)
                echo.sendto(data, addr)
                client.recv(64)
                out.append(time.perf_counter() - start)
            except TimeoutError:
                out.append(None)
    finally:
        client.close()
    return out


def test_silence_is_scheduled_on_simulated_time() -> None:
    path = WirePath(0, 1, "tbnet", 50.0, silent_from_s=60.0, silent_until_s=90.0)
    assert not path.silent_at(59.9) and path.silent_at(60.0) and path.silent_at(89.9) and not path.silent_at(90.0)
    assert WirePath(0, 1, "tbnet", 50.0, silent_from_s=60.0).silent_at(1e9)


def test_relays_delay_drop_and_silence_real_datagrams() -> None:
    now = {"t": 0.0}
    paths = [WirePath(0, 1, "slow", delay_us=20_000.0), WirePath(0, 1, "lossy", delay_us=0.0, loss=1.0),
             WirePath(0, 1, "tbnet", delay_us=0.0, silent_from_s=60.0)]
    wire = SimWire(paths, lambda: now["t"])
    echo = _echo()
    wire.set_responder(1, echo.getsockname()[1])
    wire.start()
    try:
        listed = wire.peers_config(0, ["a", "b"])[0]["paths"]
        assert isinstance(listed, list)
        assert {p["name"] for p in listed} == {"slow", "lossy", "tbnet"}
        slow = _round_trips(wire, echo, wire.relay_port(0, 1, "slow"), 3)
        assert all(rtt is not None and rtt >= 0.020 for rtt in slow), slow
        assert _round_trips(wire, echo, wire.relay_port(0, 1, "lossy"), 3) == [None, None, None]
        fast = _round_trips(wire, echo, wire.relay_port(0, 1, "tbnet"), 3)
        assert all(rtt is not None for rtt in fast)
        now["t"] = 61.0
        assert _round_trips(wire, echo, wire.relay_port(0, 1, "tbnet"), 3) == [None, None, None]
    finally:
        wire.close()
        echo.close()


def test_relays_in_a_process_of_their_own_delay_and_drop_real_datagrams() -> None:
    """The rig's wire: the relays in a child process (a GIL of their own), on the rig's clock."""
    clock = SimClock(speed=1.0)
    paths = [WirePath(0, 1, "slow", delay_us=20_000.0), WirePath(0, 1, "lossy", delay_us=0.0, loss=1.0),
             WirePath(0, 1, "fast", delay_us=0.0, silent_from_s=1e9)]
    wire = SimWire(paths, clock.elapsed)
    echo = _echo()
    wire.set_responder(1, echo.getsockname()[1])
    wire.start(own_process=True)
    try:
        assert wire._child is not None and wire._child.poll() is None
        fast = _round_trips(wire, echo, wire.relay_port(0, 1, "fast"), 3)
        assert all(rtt is not None for rtt in fast), fast
        slow = _round_trips(wire, echo, wire.relay_port(0, 1, "slow"), 3)
        assert all(rtt is not None and rtt >= 0.020 for rtt in slow), slow
        assert _round_trips(wire, echo, wire.relay_port(0, 1, "lossy"), 3) == [None, None, None]
    finally:
        wire.close()
        echo.close()
    assert wire._child.returncode == 0  # it stopped when the pipe closed


@pytest.mark.parametrize("own_process", [False, True], ids=["thread", "process"])
def test_a_path_whose_interface_has_no_carrier_carries_nothing(tmp_path: Path, own_process: bool) -> None:
    """A port that goes down (its netdev's ``carrier`` 0 in either node's tree, as the agents read it)
    passes no datagram, in either direction, until it comes back; other paths carry on."""
    trees = [Tree(tmp_path / f"node{i}") for i in range(2)]
    for tree in trees:
        for nic in ("enp1s0f0np0", "eth0"):
            tree.write(f"/sys/class/net/{nic}/carrier", "1\n")
    paths = [WirePath(0, 1, "roce", 0.0, interface="enp1s0f0np0"), WirePath(0, 1, "mgmt", 0.0, interface="eth0"),
             WirePath(0, 1, "tbnet", 0.0, interface="thunderbolt0")]  # no such NIC in the trees: never down
    wire = SimWire(paths, SimClock(speed=1.0).elapsed, roots=[t.root for t in trees])
    echo = _echo()
    wire.set_responder(1, echo.getsockname()[1])
    wire.set_responder(0, echo.getsockname()[1])
    wire.start(own_process=own_process)
    try:
        for src, dst in ((0, 1), (1, 0)):
            assert None not in _round_trips(wire, echo, wire.relay_port(src, dst, "roce"), 3)
        for down in (1, 0):  # the far end's port, then the prober's own
            trees[down].write("/sys/class/net/enp1s0f0np0/carrier", "0\n")
            time.sleep(CARRIER_POLL_S * 4)
            for src, dst in ((0, 1), (1, 0)):
                assert _round_trips(wire, echo, wire.relay_port(src, dst, "roce"), 3) == [None, None, None]
                assert None not in _round_trips(wire, echo, wire.relay_port(src, dst, "mgmt"), 3)
                assert None not in _round_trips(wire, echo, wire.relay_port(src, dst, "tbnet"), 3)
            trees[down].write("/sys/class/net/enp1s0f0np0/carrier", "1\n")
            time.sleep(CARRIER_POLL_S * 4)
            assert None not in _round_trips(wire, echo, wire.relay_port(0, 1, "roce"), 3)
    finally:
        wire.close()
        echo.close()


def test_a_responder_port_is_outside_the_kernels_ephemeral_range() -> None:
    # The agent binds its responder's port later: meanwhile a socket bound to port 0 (a prober's, a
    # relay's) could be given it if it were in the ephemeral range (a CI run lost a node's paths so).
    low, high = ephemeral_ports(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text())
    ports = [free_udp_port(random.Random(seed)) for seed in (1, 1, 2)]
    assert not [p for p in ports if low <= p <= high], (ports, low, high)
    assert len(set(ports)) == 3  # the same draw twice gives another port: the first is handed out


def test_an_unreadable_port_range_is_linuxs_default() -> None:
    assert ephemeral_ports("1024\t65000\n") == (1024, 65000)
    assert ephemeral_ports(None) == ephemeral_ports("garbage") == ephemeral_ports("9 3") == (32768, 60999)
