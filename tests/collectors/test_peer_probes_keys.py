"""The peer_probes collector against a peer with another key or a flooded port, over real UDP on 127.0.0.1."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rigmon.agent.check import readings_from
from rigmon.alarms.engine import AlarmEngine
from rigmon.clock import SystemClock
from rigmon.collectors.base import EventDraft
from rigmon.collectors.peer_probes import PeerProbeCollector, judge_path, path_events, same_address
from rigmon.config import AgentConfig
from rigmon.hw.root import HostRoot
from rigmon.probes.responder import ProbeResponder
from rigmon.probes.sender import PathTarget, PathWindow, ProbeSender
from rigmon.probes.stats import window_stats
from rigmon.probes.wire import derive_key
from rigmon.schema import SCHEMA_VERSION, CollectorStatus, Frame, PeerPathReading, ProbeResponderReading
from rigmon.typed import from_data
from tests.alarms.helpers import FakeClock, default


def _config(tmp_path: Path, peer_port: int) -> AgentConfig:
    return from_data(AgentConfig, {
        "agent": {"node": "node01", "root": str(tmp_path)},
        "probes": {"bind": "127.0.0.1", "port": 0, "rate_hz": 50, "window_s": 1},
        "peers": [{"name": "node02", "paths": [{"name": "tbnet", "address": "127.0.0.1", "port": peer_port}]}],
    }, strict=True)


async def test_a_peer_with_another_key_reads_key_mismatch_not_plain_silence(tmp_path: Path) -> None:
    """node02 holds another probe key: it refuses node01's probes without a word (a responder never
    answers a bad MAC), so node01's path is silent. node01's own responder refuses node02's probes from
    the path's address for a bad MAC: the path says key_mismatch, and its event says why."""
    theirs = derive_key("their-token")
    peer = ProbeResponder("node02", theirs, frozenset({"node01"}), 1000.0, 1000)
    peer.bind("127.0.0.1", 0)
    peer.start()
    assert peer.sock is not None
    collector = PeerProbeCollector(HostRoot(str(tmp_path)), SystemClock(), _config(tmp_path, peer.sock.getsockname()[1]),
                                   derive_key("our-token"))
    collector.start(lambda records: None)
    assert collector.responder is not None and collector.responder.sock is not None
    their_prober = ProbeSender("node02", theirs, [PathTarget("node01", "tbnet", "127.0.0.1",
                                                             collector.responder.sock.getsockname()[1])], 50.0, 1.0)
    their_prober.start()
    try:
        await asyncio.sleep(2.3)
        records = await asyncio.to_thread(collector.collect)
    finally:
        their_prober.close()
        collector.close()
        peer.close()
    (tbnet,) = [r for r in records if isinstance(r, PeerPathReading)]
    assert (tbnet.state, tbnet.key_mismatch) == ("silent", True)
    (own,) = [r for r in records if isinstance(r, ProbeResponderReading)]
    assert own.refusing_key_from == ("127.0.0.1",)
    (event,) = [r for r in records if getattr(r, "kind", None) == "peer_path_silent"]
    assert "key mismatch" in event.message  # type: ignore[attr-defined]


async def test_loss_to_a_peer_that_says_it_is_flooded_is_not_held_against_the_path(tmp_path: Path) -> None:
    """The peer's responder refuses datagrams over the source's budget (a flood from this address, here
    the prober's own rate above the peer's): a share of the probes is lost, but the replies that come say
    the peer is flooded, so the path is not lossy (no peer_path_loss); the peer raises probe_port_flooded."""
    key = derive_key("tok")
    peer = ProbeResponder("node02", key, frozenset({"node01"}), 30.0, 5)
    peer.bind("127.0.0.1", 0)
    peer.start()
    assert peer.sock is not None
    collector = PeerProbeCollector(HostRoot(str(tmp_path)), SystemClock(), _config(tmp_path, peer.sock.getsockname()[1]),
                                   key)
    collector.start(lambda records: None)
    try:
        await asyncio.sleep(2.3)
        records = await asyncio.to_thread(collector.collect)
    finally:
        collector.close()
        peer.close()
    (tbnet,) = [r for r in records if isinstance(r, PeerPathReading)]
    assert tbnet.loss_pct is not None and tbnet.loss_pct > 20.0  # 50 probes a second, 30 answered
    assert tbnet.peer_flooded and not tbnet.loss_over_limit
    assert peer.reading().flooded


async def test_a_path_drowned_by_a_flood_the_peer_reports_is_silent_but_raises_no_peer_path_silent(
        tmp_path: Path) -> None:
    """node02's probe port is flooded (its budget is below this node's probe rate, so its replies say so);
    node03's is not. Both stop answering at once (node02's flood drowns every probe, node03's path locks
    up): both paths read silent, node02's with peer_flooded, and only node03's raises the critical
    peer_path_silent; node02's event still says the flood."""
    key = derive_key("tok")
    drowned = ProbeResponder("node02", key, frozenset({"node01"}), 30.0, 5)
    locked = ProbeResponder("node03", key, frozenset({"node01"}), 1000.0, 1000)
    ports = {}
    for responder in (drowned, locked):
        responder.bind("127.0.0.1", 0)
        responder.start()
        assert responder.sock is not None
        ports[responder.node] = responder.sock.getsockname()[1]
    config = from_data(AgentConfig, {
        "agent": {"node": "node01", "root": str(tmp_path)},
        "probes": {"bind": "127.0.0.1", "port": 0, "rate_hz": 50, "window_s": 4},
        "peers": [{"name": peer, "paths": [{"name": "tbnet", "address": "127.0.0.1", "port": port}]}
                  for peer, port in ports.items()],
    }, strict=True)
    collector = PeerProbeCollector(HostRoot(str(tmp_path)), SystemClock(), config, key)
    collector.start(lambda records: None)
    try:
        await asyncio.sleep(2.0)  # answered, node02's replies saying it is flooded
        drowned.peers = locked.peers = frozenset()  # no request is answered from now on
        # 40 probes in a row (0.8 s at 50 Hz) and the reply timeout (1 s), with room for a busy machine;
        # node02's last replies stay in the 4 s window.
        await asyncio.sleep(2.8)
        records = await asyncio.to_thread(collector.collect)
    finally:
        collector.close()
        drowned.close()
        locked.close()
    paths = {r.name: r for r in records if isinstance(r, PeerPathReading)}
    assert (paths["node02/tbnet"].state, paths["node02/tbnet"].peer_flooded) == ("silent", True), paths
    assert (paths["node03/tbnet"].state, paths["node03/tbnet"].peer_flooded) == ("silent", False), paths
    events = {r.subject: r.message for r in records if isinstance(r, EventDraft) and r.kind == "peer_path_silent"}
    assert events["peer:node02/tbnet"].endswith("node02 says its probe port is flooded")
    clock = FakeClock()
    frame = Frame(schema=SCHEMA_VERSION, node="node01", run_id="r", seq=1, taken_at=clock.t, agent_start=clock.t,
                  collectors={"peer_probes": CollectorStatus(state="ok", ok=True, sampled_at=clock.t)},
                  readings=readings_from(records))
    engine = AlarmEngine(default("peer_path_silent", "peer_path_key_mismatch", "peer_path_loss"), "node01", clock)
    assert [(t.change, t.alarm.rule, t.alarm.subject) for t in engine.evaluate(frame)] == [
        ("firing", "peer_path_silent", "peer:node03/tbnet")]


def test_judge_path_does_not_hold_a_flooded_peers_loss_against_the_path() -> None:
    target = PathTarget("node02", "roce", "10.0.0.2", 9872)
    lossy = PathWindow(target, window_stats(100, [20.0] * 90), 100, 90, 0.1, None, 0)
    assert judge_path(lossy, 1000.0, 2.0, True) == ("degraded", False, True)
    flooded = PathWindow(target, window_stats(100, [20.0] * 90), 100, 90, 0.1, None, 0, True)
    assert judge_path(flooded, 1000.0, 2.0, True) == ("ok", False, False)


def test_events_say_key_mismatch_and_flood() -> None:
    base = {"name": "node02/tbnet", "peer": "node02", "path": "tbnet", "address": "10.0.0.2", "sent": 100,
            "window_s": 10.0}
    (ev,) = path_events({"node02/tbnet": "ok"}, [PeerPathReading(**base, state="silent", key_mismatch=True)], 1.0)
    assert "key mismatch" in ev.message and "key_file" in ev.message
    (ev,) = path_events({"node02/tbnet": "ok"}, [PeerPathReading(**base, state="silent", peer_flooded=True)], 1.0)
    assert ev.message.endswith("node02 says its probe port is flooded")


@pytest.mark.parametrize(("a", "b", "same"), [
    ("10.0.0.2", "10.0.0.2", True),
    ("10.0.0.2", "::ffff:10.0.0.2", True),  # a responder bound to :: sees IPv4 peers mapped
    ("fe80::1%thunderbolt0", "fe80::1", True),
    ("10.0.0.2", "10.0.0.3", False),
    ("fe80::1", "fe80::2%tb0", False),
])
def test_same_address(a: str, b: str, same: bool) -> None:
    assert same_address(a, b) is same
