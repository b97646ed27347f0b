"""One ``[[peers]]`` list copied unchanged to every node: each node skips the entry naming itself.

Real responders and senders on 127.0.0.1, one port per node: before, each node probed its own
responder too, and its path read a loopback round trip as the link's.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from pathlib import Path

import pytest

from rigmon.agent.agent import probe_key
from rigmon.agent.check import run_check
from rigmon.agent.check_format import format_report
from rigmon.clock import SystemClock
from rigmon.collectors.base import NoData
from rigmon.collectors.peer_probes import PeerProbeCollector
from rigmon.config import AgentConfig, PeerPathSection, ProbesSection
from rigmon.hw.root import HostRoot
from rigmon.probes.own_paths import is_own_path
from rigmon.probes.wire import derive_key
from rigmon.schema import PeerPathReading, ProbeResponderReading
from rigmon.sim.wire import free_udp_port
from rigmon.typed import from_data


def _lab_peers(ports: dict[str, int]) -> list[dict[str, object]]:
    """The lab's one peers list: every node, the one reading it included."""
    return [{"name": name, "paths": [{"name": "tbnet", "address": "127.0.0.1", "port": port}]}
            for name, port in ports.items()]


def _node_config(tmp_path: Path, node: str, ports: dict[str, int]) -> AgentConfig:
    return from_data(AgentConfig, {
        "agent": {"node": node, "root": str(tmp_path)},
        "probes": {"bind": "127.0.0.1", "port": ports[node], "rate_hz": 50, "window_s": 1},
        "peers": _lab_peers(ports),
    }, strict=True)


async def test_a_peers_file_copied_to_every_node_probes_the_others_only(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ports = {"node01": free_udp_port(), "node02": free_udp_port()}
    key = derive_key("tok")
    caplog.set_level(logging.INFO, logger="rigmon.collectors.peer_probes")
    nodes = {name: PeerProbeCollector(HostRoot(str(tmp_path)), SystemClock(), _node_config(tmp_path, name, ports),
                                      key) for name in ports}
    for collector in nodes.values():
        collector.start(lambda records: None)
    try:
        await asyncio.sleep(1.4)
        got = {name: await asyncio.to_thread(c.collect) for name, c in nodes.items()}
        await asyncio.to_thread(nodes["node01"].collect)  # said once, at the start: not every sample
    finally:
        for collector in nodes.values():
            collector.close()
    for name, records in got.items():
        (other,) = {"node01", "node02"} - {name}
        paths = [r for r in records if isinstance(r, PeerPathReading)]
        # Only the other node's path: no "node01/tbnet" read by node01 off its own responder.
        assert [r.name for r in paths] == [f"{other}/tbnet"], name
        assert paths[0].received > 0, paths[0]  # and the other node answers it
        (responder,) = [r for r in records if isinstance(r, ProbeResponderReading)]
        assert responder.answered_total > 0  # this node answers the other's probes
    said = [r.getMessage() for r in caplog.records if "lists this node" in r.getMessage()]
    assert said == [f"[[peers]] lists this node ({name}): skipped, not probed (the same peers file serves every "
                    "node of the lab)" for name in ("node01", "node02")]


def test_a_peers_list_of_this_node_alone_is_no_peers_and_needs_no_key(tmp_path: Path) -> None:
    config = _node_config(tmp_path, "node01", {"node01": 9872})
    assert probe_key(config, None) is None  # not an error that stops the agent
    with pytest.raises(NoData, match=r"no \[\[peers\]\] configured but this node \(node01\)"):
        PeerProbeCollector(HostRoot(str(tmp_path)), SystemClock(), config, None).collect()
    assert config.probed_peers == ()
    other = _node_config(tmp_path, "node03", {"node01": 9872, "node03": 9873})
    assert [p.name for p in other.probed_peers] == ["node01"]
    # No [agent] node: the node's name is its host name, and the entry of that name is this node's.
    unnamed = from_data(AgentConfig, {"peers": _lab_peers({socket.gethostname(): 9872, "node99": 9873})},
                        strict=True)
    assert [p.name for p in unnamed.probed_peers] == ["node99"]
    assert unnamed.own_peer_note is not None and socket.gethostname() in unnamed.own_peer_note


def test_check_says_this_node_is_skipped_and_stays_healthy(tmp_path: Path) -> None:
    config = _node_config(tmp_path, "node02", {"node01": 9872, "node02": 9873})
    report = run_check(config, SystemClock(), {}, None, 1, 0.0)
    assert report.exit_code == 0
    (note,) = report.notes
    assert note == ("[[peers]] lists this node (node02): skipped, not probed (the same peers file serves "
                    "every node of the lab)")
    assert "note: [[peers]] lists this node (node02): skipped" in format_report(report, 120)
    plain = _node_config(tmp_path, "node03", {"node01": 9872, "node03": 9873})
    assert run_check(plain.__class__(agent=plain.agent, peers=plain.peers[:1]), SystemClock(), {}, None, 1,
                     0.0).notes == ()


def _path(address: str, port: int = 0, transport: str = "udp") -> PeerPathSection:
    return from_data(PeerPathSection, {"name": "roce", "address": address, "port": port, "transport": transport})


@pytest.mark.parametrize(("path", "bind", "own_port", "want"), [
    (_path("10.0.0.5"), "0.0.0.0", 9872, True),           # one of this node's addresses, at its probe port
    (_path("127.0.0.2"), "0.0.0.0", 9872, True),          # any loopback address is this node's
    (_path("10.0.0.5", port=9900), "0.0.0.0", 9872, False),  # another port: another agent on this machine
    (_path("127.0.0.1", port=9900), "0.0.0.0", 9872, False),  # (the simulator's nodes share its loopback)
    (_path("10.0.0.6"), "0.0.0.0", 9872, False),          # not this node's address
    (_path("10.0.0.5"), "10.0.0.7", 9872, False),         # the responder does not listen there
    (_path("10.0.0.5"), "10.0.0.5", 9872, True),
    (_path("10.0.0.5", port=9999), "0.0.0.0", 0, False),  # [probes] port 0: its own port is unknown
    (_path("10.0.0.5", transport="tcp"), "0.0.0.0", 9872, True),   # the agent's own HTTP port (listen)
    (_path("10.0.0.5", port=9000, transport="tcp"), "0.0.0.0", 9872, False),
    (_path("fe80::5%thunderbolt0"), "::", 9872, True),
])
def test_is_own_path(path: PeerPathSection, bind: str, own_port: int, want: bool) -> None:
    probes = from_data(ProbesSection, {"bind": bind, "port": own_port})
    own = {ipaddress.ip_address("10.0.0.5"), ipaddress.ip_address("fe80::5")}
    assert is_own_path(path, probes, 9871, own) is want


def test_an_entry_under_another_name_at_this_nodes_address_is_skipped(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """node02 is also known as ``gpu-b`` (an old name in the lab's peers file): its entry's address is node02's
    own, at its own probe port: skipped and said as the entry named node02 is, not probed (~0 us off itself)."""
    config = from_data(AgentConfig, {
        "agent": {"node": "node02", "root": str(tmp_path)},
        "probes": {"port": 9872},
        "peers": [{"name": "node01", "paths": [{"name": "roce", "address": "10.0.0.1"}]},
                  {"name": "gpu-b", "paths": [{"name": "roce", "address": "10.0.0.2"}]}],
    }, strict=True)
    caplog.set_level(logging.INFO, logger="rigmon.collectors.peer_probes")
    collector = PeerProbeCollector(HostRoot(str(tmp_path)), SystemClock(), config, derive_key("tok"),
                                   {ipaddress.ip_address("10.0.0.2")})
    try:
        assert [t.name for t in collector._targets] == ["node01/roce"]
    finally:
        collector.close()
    note = ("[[peers]] lists this node (node02) as gpu-b (path roce: 10.0.0.2 is this node's address): skipped, "
            "not probed (the same peers file serves every node of the lab)")
    assert collector.own_address_notes == (note,)
    assert [r.getMessage() for r in caplog.records if "lists this node" in r.getMessage()] == [note]
    # Without that address among the node's own, the entry is another node's and probed.
    other = PeerProbeCollector(HostRoot(str(tmp_path)), SystemClock(), config, derive_key("tok"), ())
    try:
        assert [t.name for t in other._targets] == ["node01/roce", "gpu-b/roce"]
    finally:
        other.close()


def test_check_says_an_entry_at_this_nodes_address_is_skipped(tmp_path: Path) -> None:
    own = free_udp_port()
    config = from_data(AgentConfig, {
        "agent": {"node": "node02", "root": str(tmp_path)},
        "probes": {"bind": "127.0.0.1", "port": own},
        "peers": [{"name": "gpu-b", "paths": [{"name": "mgmt", "address": "127.0.0.1"}]}],
    }, strict=True)
    # Loopback is this node's whatever its interfaces' addresses: none are given.
    collector = PeerProbeCollector(HostRoot(str(tmp_path)), SystemClock(), config, derive_key("tok"), ())
    try:
        report = run_check(config, SystemClock(), {"peer_probes": collector}, None, 1, 0.0)
    finally:
        collector.close()
    assert report.notes == (("[[peers]] lists this node (node02) as gpu-b (path mgmt: 127.0.0.1 is this node's "
                            "address): skipped, not probed (the same peers file serves every node of the lab)"),)
