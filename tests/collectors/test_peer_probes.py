"""The peer_probes collector: path states, events, link speed, keys, and probing a real responder on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest

from rigmon.agent.agent import probe_key
from rigmon.clock import SystemClock
from rigmon.collectors.base import CollectorError, NoData
from rigmon.collectors.peer_probes import (
    PeerProbeCollector,
    judge_path,
    path_events,
    silent_after,
    with_peer_reachable,
)
from rigmon.config import AgentConfig
from rigmon.hw.root import HostRoot
from rigmon.probes.responder import ProbeResponder
from rigmon.probes.sender import PathTarget, PathWindow
from rigmon.probes.stats import window_stats
from rigmon.probes.wire import derive_key
from rigmon.schema import PeerPathReading, ProbeResponderReading
from rigmon.sim import write_tree
from rigmon.sim.wire import free_udp_port
from rigmon.typed import from_data

TARGET = PathTarget("node02", "roce", "10.0.0.2", 9872)


def _window(sent: int, rtts: list[float]) -> PathWindow:
    return PathWindow(TARGET, window_stats(sent, rtts), sent, len(rtts), None, None)


@pytest.mark.parametrize(("sent", "rtts", "complete", "expected"), [
    (100, [20.0] * 100, True, ("ok", False, False)),
    (100, [20.0] * 100, False, ("unknown", False, False)),  # the first window is not complete yet
    (0, [], True, ("unknown", False, False)),
    (100, [], True, ("silent", False, False)),
    (100, [20.0] * 95, True, ("degraded", False, True)),  # 5 % lost, limit 2 %
    (100, [20.0] * 99, True, ("ok", False, False)),  # 1 % lost
    (100, [20.0] * 97 + [2500.0] * 3, True, ("degraded", True, False)),  # p99 2.5 ms, limit 1 ms
    (100, [20.0] * 99 + [2500.0], True, ("ok", False, False)),  # one outlier is the max, not the p99
])
def test_judge_path(sent: int, rtts: list[float], complete: bool, expected: tuple[str, bool, bool]) -> None:
    assert judge_path(_window(sent, rtts), 1000.0, 2.0, complete) == expected


@pytest.mark.parametrize(("run", "expected"), [
    (19, "degraded"),  # 19 probes in a row unanswered (1.9 s): 19 % lost, not silent yet
    (20, "silent"),  # a fifth of the window: the path stopped answering, whatever the window's start says
    (0, "degraded"),
])
def test_a_path_is_silent_once_its_last_probes_in_a_row_went_unanswered(run: int, expected: str) -> None:
    window = PathWindow(TARGET, window_stats(100, [20.0] * 80), 100, 80, 2.3, None, run)
    assert judge_path(window, 1000.0, 2.0, True, silent_after(10.0, 10.0))[0] == expected


def test_silent_after_is_a_fifth_of_the_window_and_at_least_five_probes() -> None:
    assert silent_after(10.0, 10.0) == 20
    assert silent_after(10.0, 2.5) == 5 == silent_after(1.0, 10.0)
    assert silent_after(100.0, 60.0) == 1200


def _reading(state: str, **kw: object) -> PeerPathReading:
    return PeerPathReading(name="node02/tbnet", peer="node02", path="tbnet", address="10.0.0.2",
                           state=state, **kw)  # type: ignore[arg-type]


def test_events_on_state_changes_only() -> None:
    assert path_events({}, [_reading("unknown")], 1.0) == []
    assert path_events({}, [_reading("ok")], 1.0) == []
    assert path_events({"node02/tbnet": "ok"}, [_reading("ok")], 1.0) == []
    (silent,) = path_events({"node02/tbnet": "ok"}, [_reading("silent", sent=100, window_s=10.0)], 1.0)
    assert (silent.kind, silent.subject) == ("peer_path_silent", "peer:node02/tbnet")
    assert "stopped answering" in silent.message and silent.data and silent.data["from_state"] == "ok"
    (degraded,) = path_events({"node02/tbnet": "ok"}, [_reading("degraded", rtt_p99_us=2500.0, p99_limit_us=1000.0,
                                                                p99_over_limit=True)], 1.0)
    assert degraded.kind == "peer_path_degraded" and "p99 2500 us above 1000 us" in degraded.message
    (back,) = path_events({"node02/tbnet": "silent"}, [_reading("ok")], 1.0)
    assert back.kind == "peer_path_recovered"
    (never,) = path_events({}, [_reading("silent")], 1.0)  # a path that never answered
    assert never.kind == "peer_path_silent"
    (lockup,) = path_events({"node02/tbnet": "ok"}, [_reading("silent", sent=100, window_s=10.0,
                                                              peer_reachable=True)], 1.0)
    assert lockup.message.endswith("no reply to 100 probes in 10 s, while node02 answers on its other paths")
    (prompt,) = path_events({"node02/tbnet": "ok"}, [_reading("silent", sent=100, received=70, window_s=10.0,
                                                              last_reply_age_s=3.04)], 1.0)
    assert prompt.message.endswith("stopped answering: no reply for 3.0 s")
    (again,) = path_events({"node02/tbnet": "silent"}, [_reading("degraded", loss_pct=30.0, loss_over_limit=True)],
                           1.0)
    assert again.kind == "peer_path_degraded" and "answers again, degraded: 30.0 % lost" in again.message


def test_peer_reachable_tells_a_path_lockup_from_a_node_down() -> None:
    def reading(peer: str, path: str, received: int, state: str = "ok") -> PeerPathReading:
        return PeerPathReading(name=f"{peer}/{path}", peer=peer, path=path, address="10.0.0.2", received=received,
                               state=state)  # type: ignore[arg-type]

    out = {r.name: r.peer_reachable for r in with_peer_reachable([
        reading("node02", "tbnet", 0), reading("node02", "mgmt", 90),  # tbnet locked up, node02 up
        reading("node03", "tbnet", 0), reading("node03", "mgmt", 0),  # node03 down
        # node05 went down 3 s ago: its paths still hold replies of the window's start, but are silent
        reading("node05", "tbnet", 70, "silent"), reading("node05", "mgmt", 70, "silent"),
        reading("node04", "roce", 0)])}  # one path only: cannot tell
    assert out == {"node02/tbnet": True, "node02/mgmt": True, "node03/tbnet": False, "node03/mgmt": False,
                   "node05/tbnet": False, "node05/mgmt": False, "node04/roce": None}


def _config(tmp_path: Path, port: int = 9872, **probes: object) -> AgentConfig:
    # node02 on this machine's loopback at another port: at this node's own port it would be this node.
    return from_data(AgentConfig, {
        "agent": {"node": "node01", "root": str(tmp_path)},
        "probes": {"bind": "127.0.0.1", "port": port, **probes},
        "peers": [{"name": "node02", "paths": [{"name": "tbnet", "address": "127.0.0.1", "port": port + 1,
                                                "interface": "thunderbolt0"}]}],
    }, strict=True)


def test_no_peers_is_absent_and_no_key_is_an_error(tmp_path: Path) -> None:
    plain = from_data(AgentConfig, {"agent": {"root": str(tmp_path)}}, strict=True)
    with pytest.raises(NoData):
        PeerProbeCollector(HostRoot(str(tmp_path)), SystemClock(), plain, None).collect()
    with pytest.raises(CollectorError, match="key_file"):
        PeerProbeCollector(HostRoot(str(tmp_path)), SystemClock(), _config(tmp_path), None).collect()


def test_probe_key_from_key_file_or_token(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert probe_key(from_data(AgentConfig, {}, strict=True), None) is None  # no peers: no key needed
    with pytest.raises(ValueError, match="key_file"):
        probe_key(config, None)
    assert probe_key(config, "tok") == derive_key("tok")
    key_file = tmp_path / "probe.key"
    key_file.write_text("shared\n")
    os.chmod(key_file, 0o600)
    assert probe_key(_config(tmp_path, key_file=str(key_file)), "tok") == derive_key("shared")
    os.chmod(key_file, 0o644)
    with pytest.raises(Exception, match="probes.key_file"):
        probe_key(_config(tmp_path, key_file=str(key_file)), "tok")


async def test_probes_a_real_responder_and_reads_the_link_speed(tmp_path: Path) -> None:
    write_tree(tmp_path, {"/sys/class/net/thunderbolt0/speed": "40000\n"})
    key = derive_key("tok")
    peer = ProbeResponder("node02", key, frozenset({"node01"}), 1000.0, 1000)
    peer.bind("127.0.0.1", 0)
    peer.start()
    assert peer.sock is not None
    peer_port = peer.sock.getsockname()[1]
    config = from_data(AgentConfig, {
        "agent": {"node": "node01", "root": str(tmp_path)},
        "probes": {"bind": "127.0.0.1", "port": 0, "rate_hz": 50, "window_s": 1},
        "peers": [{"name": "node02", "paths": [
            {"name": "tbnet", "address": "127.0.0.1", "port": peer_port, "interface": "thunderbolt0"},
            {"name": "dead", "address": "127.0.0.1", "port": 9, "p99_limit_us": 50}]}],
    }, strict=True)
    collector = PeerProbeCollector(HostRoot(str(tmp_path)), SystemClock(), config, key)
    collector.start(lambda records: None)
    try:
        await asyncio.sleep(2.3)
        records = await asyncio.to_thread(collector.collect)
    finally:
        collector.close()
        peer.close()
    paths = {r.path: r for r in records if isinstance(r, PeerPathReading)}
    tbnet, dead = paths["tbnet"], paths["dead"]
    assert tbnet.state in ("ok", "degraded")  # a loaded CI machine may exceed 1 ms at p99
    assert tbnet.received > 0 and tbnet.rtt_p50_us is not None and tbnet.rtt_p50_us > 0
    assert tbnet.rtt_p50_us <= tbnet.rtt_p99_us <= tbnet.rtt_max_us  # type: ignore[operator]
    assert tbnet.link_gbps == 40.0 and tbnet.interface == "thunderbolt0"
    assert tbnet.received_total <= tbnet.sent_total
    assert dead.state == "silent" and dead.received == 0 and dead.sent > 0 and dead.p99_limit_us == 50
    assert dead.error is not None and "ECONNREFUSED" in dead.error  # nothing listens there: the ICMP says so
    assert tbnet.error is None
    # Every reply the prober counted was answered by the responder; the sender keeps probing at
    # 50 Hz until it is closed, so a probe or two answered after the reading was taken may be missing.
    assert 0 <= peer.reading().answered_total - tbnet.received_total <= 3
    (own,) = [r for r in records if isinstance(r, ProbeResponderReading)]
    assert own.address.startswith("127.0.0.1:")


def one_peer_path(tmp_path: Path, window_s: float) -> tuple[ProbeResponder, PeerProbeCollector]:
    """A real responder (node02) on 127.0.0.1 and node01's collector probing it on one path, ``tbnet``, at 20 Hz."""
    key = derive_key("tok")
    peer = ProbeResponder("node02", key, frozenset({"node01"}), 1000.0, 1000)
    peer.bind("127.0.0.1", 0)
    peer.start()
    assert peer.sock is not None
    config = from_data(AgentConfig, {
        "agent": {"node": "node01", "root": str(tmp_path)},
        "probes": {"bind": "127.0.0.1", "port": 0, "rate_hz": 20, "window_s": window_s},
        "peers": [{"name": "node02", "paths": [
            {"name": "tbnet", "address": "127.0.0.1", "port": peer.sock.getsockname()[1]}]}],
    }, strict=True)
    return peer, PeerProbeCollector(HostRoot(str(tmp_path)), SystemClock(), config, key)


async def test_a_path_that_stops_answering_is_silent_within_seconds_not_a_window_later(tmp_path: Path) -> None:
    """The peer's responder stops answering (a lockup) while the window still holds its replies: the
    path reads silent once a fifth of a window's probes in a row went unanswered (it read degraded,
    by its loss, until the whole window was empty, and an outage shorter than the window never did)."""
    peer, collector = one_peer_path(tmp_path, window_s=5)
    collector.start(lambda records: None)
    try:
        await asyncio.sleep(5.2)  # one whole window answered
        peer.peers = frozenset()  # the path locks up: no request is answered from now on
        # 20 probes in a row (1 s at 20 Hz) and the reply timeout (1 s), then some room for a busy machine
        await asyncio.sleep(2.8)
        records = await asyncio.to_thread(collector.collect)
    finally:
        collector.close()
        peer.close()
    (tbnet,) = [r for r in records if isinstance(r, PeerPathReading)]
    assert tbnet.received > 0  # the window still holds the replies before the lockup
    assert tbnet.state == "silent", tbnet
    assert tbnet.last_reply_age_s is not None and tbnet.last_reply_age_s >= 2.0
    (event,) = [r for r in records if getattr(r, "kind", None) == "peer_path_silent"]
    assert "no reply for" in event.message  # type: ignore[attr-defined]


def test_a_responder_port_in_use_is_a_collector_error_until_it_is_free(tmp_path: Path) -> None:
    blocker = ProbeResponder("other", derive_key("tok"), frozenset(), 1.0, 1)
    blocker.bind("127.0.0.1", 0)
    assert blocker.sock is not None
    port = blocker.sock.getsockname()[1]
    config = _config(tmp_path, port=port)
    collector = PeerProbeCollector(HostRoot(str(tmp_path)), SystemClock(), config, derive_key("tok"))
    collector.start(lambda records: None)
    try:
        with pytest.raises(CollectorError, match=f"cannot listen on 127.0.0.1:{port}"):
            collector.collect()
        blocker.close()  # the port is free again: the next collect binds it
        assert any(isinstance(r, ProbeResponderReading) for r in collector.collect())
    finally:
        collector.close()
        blocker.close()


async def test_tcp_paths_time_a_connect_and_a_closed_port_is_silent(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.setblocking(False)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connects are refused
    config = from_data(AgentConfig, {
        "agent": {"node": "node01", "root": str(tmp_path)},
        "probes": {"bind": "127.0.0.1", "port": 0, "rate_hz": 50, "window_s": 1},
        "peers": [{"name": "node02", "paths": [
            {"name": "http", "address": "127.0.0.1", "port": listener.getsockname()[1], "transport": "tcp"},
            {"name": "gone", "address": "127.0.0.1", "port": closed.getsockname()[1], "transport": "tcp"}]}],
    }, strict=True)
    collector = PeerProbeCollector(HostRoot(str(tmp_path)), SystemClock(), config, derive_key("tok"))
    collector.start(lambda records: None)
    accepted = 0
    try:
        for _ in range(23):
            await asyncio.sleep(0.1)
            while True:
                try:
                    conn, _ = listener.accept()
                except BlockingIOError:
                    break
                conn.close()
                accepted += 1
        records = await asyncio.to_thread(collector.collect)
    finally:
        collector.close()
        listener.close()
        closed.close()
    paths = {r.path: r for r in records if isinstance(r, PeerPathReading)}
    assert paths["http"].transport == "tcp" and paths["http"].received > 0 and paths["http"].rtt_p50_us is not None
    assert accepted > 0
    assert paths["gone"].state == "silent" and paths["gone"].received == 0
    assert paths["gone"].error is not None and "ECONNREFUSED" in paths["gone"].error


async def test_a_sender_thread_that_died_is_a_collector_error_and_is_started_again(tmp_path: Path) -> None:
    """The sender's thread ended (its select() failed): nothing was probed any more, every path slid to
    ``unknown`` a window later (muted on the dashboard) and a firing peer_path_silent resolved, while the
    collector said ok. It says so, and probes again."""
    peer, collector = one_peer_path(tmp_path, window_s=1)
    collector.start(lambda records: None)
    try:
        await asyncio.sleep(1.2)
        assert collector.sender is not None
        collector.sender._selector.close()  # the thread's next select() fails: it ends
        await asyncio.sleep(1.5)
        with pytest.raises(CollectorError, match="probe sender stopped"):
            await asyncio.to_thread(collector.collect)
        await asyncio.sleep(1.5)  # probing again: a whole window answered
        records = await asyncio.to_thread(collector.collect)
        (tbnet,) = [r for r in records if isinstance(r, PeerPathReading)]
        assert tbnet.received > 0 and tbnet.state != "unknown", tbnet
    finally:
        collector.close()
        peer.close()


def test_a_path_over_an_rdma_port_that_is_down_says_so(tmp_path: Path) -> None:
    """node01's roce path goes out of enp1s0f0np0, mlx5_0/1's RoCE netdev: while the port is down, and for a
    probe window after it is back (the path answers again only then), the path's silence is the port's
    (rdma_port_down); its mgmt path over eth0, no RDMA port's, never is."""
    import time

    port = "sys/class/infiniband/mlx5_0/ports/1"
    write_tree(tmp_path, {f"{port}/state": "1: DOWN\n", f"{port}/gid_attrs/ndevs/0": "enp1s0f0np0\n"})
    own = free_udp_port()
    config = from_data(AgentConfig, {
        "agent": {"node": "node01", "root": str(tmp_path)},
        "probes": {"bind": "127.0.0.1", "port": own, "window_s": 1},
        "peers": [{"name": "node02", "paths": [
            {"name": "roce", "address": "127.0.0.1", "port": own + 1, "interface": "enp1s0f0np0"},
            {"name": "mgmt", "address": "127.0.0.1", "port": own + 1, "interface": "eth0"}]}],
    }, strict=True)
    collector = PeerProbeCollector(HostRoot(str(tmp_path)), SystemClock(), config, derive_key("tok"))
    collector.start(lambda records: None)

    def down() -> dict[str, bool]:
        return {r.path: r.rdma_port_down for r in collector.collect() if isinstance(r, PeerPathReading)}

    try:
        assert down() == {"roce": True, "mgmt": False}
        (tmp_path / port / "state").write_text("4: ACTIVE\n")
        assert down() == {"roce": True, "mgmt": False}  # back, within a window of its last down read
        time.sleep(1.1)
        assert down() == {"roce": False, "mgmt": False}
    finally:
        collector.close()


async def test_the_peers_rdma_paths_to_a_node_whose_port_is_down_hear_it_on_its_other_paths(tmp_path: Path) -> None:
    """node01's RoCE port is down: node02's roce path to it is silent. node01's replies on the management path say
    it has an RDMA port down (FLAG_RDMA_DOWN), so node02's roce path, over an RDMA port of its own, says
    peer_rdma_port_down (node01's rdma_port_down is the alarm); its mgmt path, not an RDMA one, does not."""
    ports = {"node01": free_udp_port(), "node02": free_udp_port()}
    nowhere = free_udp_port()
    collectors: dict[str, PeerProbeCollector] = {}
    for name, other, state in (("node01", "node02", "1: DOWN"), ("node02", "node01", "4: ACTIVE")):
        root = tmp_path / name
        base = "sys/class/infiniband/mlx5_0/ports/1"
        write_tree(root, {f"{base}/state": f"{state}\n", f"{base}/gid_attrs/ndevs/0": "enp1s0f0np0\n"})
        config = from_data(AgentConfig, {
            "agent": {"node": name, "root": str(root)},
            "probes": {"bind": "127.0.0.1", "port": ports[name], "rate_hz": 50, "window_s": 1},
            "peers": [{"name": other, "paths": [
                {"name": "mgmt", "address": "127.0.0.1", "port": ports[other], "interface": "eth0"},
                {"name": "roce", "address": "127.0.0.1", "port": nowhere, "interface": "enp1s0f0np0"}]}],
        }, strict=True)
        collectors[name] = PeerProbeCollector(HostRoot(str(root)), SystemClock(), config, derive_key("tok"))
    for collector in collectors.values():
        collector.start(lambda records: None)
    try:
        await asyncio.to_thread(collectors["node01"].collect)  # node01 reads its port down: its replies say so
        await asyncio.sleep(1.3)
        got = {r.path: r for r in await asyncio.to_thread(collectors["node02"].collect) if isinstance(r, PeerPathReading)}
    finally:
        for collector in collectors.values():
            collector.close()
    assert (got["roce"].state, got["roce"].peer_rdma_port_down, got["roce"].rdma_port_down) == ("silent", True, False)
    assert (got["mgmt"].state, got["mgmt"].peer_rdma_port_down) == ("ok", False)
