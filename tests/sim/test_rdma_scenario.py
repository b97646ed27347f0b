"""Scenario rdma-port-flap: the real collector reads the simulated RDMA port trees; default rules judge them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.rules import default_rules
from rigmon.collectors.base import EventDraft
from rigmon.collectors.host import HostCollector
from rigmon.collectors.infiniband import InfinibandCollector
from rigmon.hw.root import HostRoot
from rigmon.schema import InfinibandPortReading, NetInterfaceReading
from rigmon.sim.node import SimNode
from rigmon.sim.rdma import PACKET_BYTES, TRAFFIC_SHARE
from rigmon.sim.rig import SimRig, get_scenario
from rigmon.sim.scenarios.rdma_port_flap import (
    DOWN_FROM_S,
    DOWN_UNTIL_S,
    FLAPPING_NODE,
    PERIOD_S,
    SLOW_UNTIL_S,
    build_strix_roce_node,
)
from rigmon.sim.scenarios.tp_cluster import FLAP_DOWN_S, TBNET_PAIR, TBNET_SILENT_FROM_S
from tests.alarms.helpers import T0, FakeClock, sim_frames


def test_counters_move_with_traffic_and_the_flapping_port_alarms(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    nodes = FLAPPING_NODE + 2  # one more node, whose port stays quiet
    engines: dict[str, AlarmEngine] = {}
    fired: Counter[tuple[str, str, str]] = Counter()
    received: dict[str, list[float | None]] = {}
    for frame in sim_frames("rdma-port-flap", nodes, tmp_path, clock, int(PERIOD_S), 1.0):
        engine = engines.setdefault(frame.node, AlarmEngine(default_rules(), frame.node, clock))
        for tr in engine.evaluate(frame):
            if tr.change == "firing":
                fired[(frame.node, tr.alarm.rule, tr.alarm.subject)] += 1
        (port,) = frame.readings.infiniband
        received.setdefault(frame.node, []).append(port.port_data_received_bytes_per_s)
    flapping = sorted(engines)[FLAPPING_NODE]
    # Traffic follows the job: after it starts, every node's port moves gigabytes a second.
    for node, rates in received.items():
        assert rates[0] is None
        moving = [r for r in rates[10:int(DOWN_FROM_S) - 1] if r is not None]
        assert moving and min(moving) > 1e9, node
    subject = "rdma:mlx5_0/1"
    # sim_frames carries no events, so rdma_port_flapped (an event rule) is left to test_scenario_alarms.
    # The port's netdev retrains with it: at 25 Gb/s it is a network link slower than it came up.
    assert {(rule, subj) for node, rule, subj in fired if node == flapping} == {
        ("rdma_port_down", subject), ("rdma_port_below_rate", subject), ("rdma_port_errors_rising", subject),
        ("net_link_slower", "link:enp1s0f0np0")}
    assert not [key for key in fired if key[0] != flapping], fired


def test_the_collector_reports_the_flap_as_events(tmp_path: Path) -> None:
    rig = SimRig(get_scenario("rdma-port-flap"), FLAPPING_NODE + 1, tmp_path)
    try:
        node = rig.nodes[FLAPPING_NODE]
        clock = FakeClock(T0)
        collector = InfinibandCollector(HostRoot(node.tree.root), clock)
        kinds: list[str] = []
        for t in range(1, int(PERIOD_S)):
            clock.t = T0 + t
            rig.step(float(t))
            kinds += [r.kind for r in collector.collect() if isinstance(r, EventDraft)]
    finally:
        rig.close()
    assert kinds.count("rdma_link_downed") == 1
    assert kinds.count("rdma_port_state_changed") == 2  # ACTIVE -> DOWN, DOWN -> ACTIVE
    assert "rdma_port_rate_changed" in kinds and "rdma_port_degraded" in kinds


def test_the_roce_netdev_follows_its_port(tmp_path: Path) -> None:
    """On mlx5 a RoCE port and its netdev are one link: no carrier while the port is down, its rate as speed."""
    rig = SimRig(get_scenario("rdma-port-flap"), FLAPPING_NODE + 1, tmp_path)
    try:
        clock = FakeClock(T0)
        collector = HostCollector(HostRoot(rig.nodes[FLAPPING_NODE].tree.root), clock)
        port = rig.nodes[FLAPPING_NODE].tree.root / "sys/class/infiniband/mlx5_0/ports/1"
        seen: dict[float, NetInterfaceReading] = {}
        phys: list[str] = []
        for t in (DOWN_FROM_S - 5.0, DOWN_FROM_S + 5.0, DOWN_UNTIL_S + 5.0, SLOW_UNTIL_S + 5.0):
            clock.t = T0 + t
            rig.step(t)
            phys.append((port / "phys_state").read_text().strip())
            (seen[t],) = [r for r in collector.collect()
                          if isinstance(r, NetInterfaceReading) and r.name == "enp1s0f0np0"]
    finally:
        rig.close()
    got = [(r.operstate, r.carrier, r.speed_mbps, r.carrier_changes_total) for r in seen.values()]
    assert got == [("up", True, 100000, 1), ("down", False, None, 2), ("up", True, 25000, 3), ("up", True, 100000, 3)]
    # The port reads as mlx5 reports a RoCE port without carrier: DOWN, physically Disabled (not Polling).
    assert phys == ["5: LinkUp", "3: Disabled", "5: LinkUp", "5: LinkUp"]


class SteadyRoce:
    """A Strix Halo node with a 100 GbE RoCE port (as in rdma-port-flap) training at a steady full load."""

    name = "steady-roce"
    description = "one node at full load, its ports never flapping"
    default_nodes = 1

    def build(self, node: SimNode, index: int) -> None:
        build_strix_roce_node(node, index)

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        node.load = 1.0


def test_nic_and_rdma_counters_follow_the_traffic_between_physics_steps(tmp_path: Path) -> None:
    """Physics advance on a 0.1 s grid; reads at times off that grid still see the simulated rates.

    Written as they stood at the grid, a read at 3.09 s and one at 4.01 s would see ten steps of
    traffic in 0.92 s (+9 %), one at 5.08 s ten in 1.07 s (-7 %): frame-to-frame jitter the
    traffic does not have (each 0.1 s step varies by up to +-10 %, which a second averages: within
    4 % of the physics' rate over these frames, where the grid's counters read up to 12 % off).
    """
    rig = SimRig(SteadyRoce(), 1, tmp_path)
    clock = FakeClock(T0)
    root = HostRoot(rig.nodes[0].tree.root)
    host, infiniband = HostCollector(root, clock), InfinibandCollector(root, clock)
    rates: list[dict[str, float | None]] = []
    try:
        for t in (2.0, 3.09, 4.01, 5.08, 5.99, 7.1, 8.05, 9.0):
            clock.t = T0 + t
            rig.step(t)
            got: dict[str, float | None] = {}
            for r in host.collect():
                if isinstance(r, NetInterfaceReading):
                    got[f"{r.name} rx"], got[f"{r.name} tx"] = r.rx_bytes_per_s, r.tx_bytes_per_s
                    got[f"{r.name} rx packets"] = r.rx_packets_per_s
            for r in infiniband.collect():
                if isinstance(r, InfinibandPortReading):
                    got["mlx5_0 rx"] = r.port_data_received_bytes_per_s
                    got["mlx5_0 tx"] = r.port_data_transmitted_bytes_per_s
                    got["mlx5_0 rx packets"] = r.port_packets_received_per_s
            rates.append(got)
    finally:
        rig.close()
    # What the physics move at full load (each step's +-10 % averages out over a second).
    expected = {"eth0 rx": 2500e6 / 8 * 0.3 * 1.02, "enp1s0f0np0 rx": 100e9 / 8 * 0.3 * 1.02,
                "mlx5_0 rx": 100e9 / 8 * TRAFFIC_SHARE}
    expected["eth0 tx"], expected["enp1s0f0np0 tx"] = expected["eth0 rx"] * 0.97, expected["enp1s0f0np0 rx"] * 0.97
    expected["mlx5_0 tx"] = expected["mlx5_0 rx"]
    expected["eth0 rx packets"], expected["enp1s0f0np0 rx packets"] = expected["eth0 rx"] / 8000, \
        expected["enp1s0f0np0 rx"] / 8000
    expected["mlx5_0 rx packets"] = expected["mlx5_0 rx"] / PACKET_BYTES
    for got in rates[1:]:
        for key, value in expected.items():
            assert got[key] == pytest.approx(value, rel=0.05), (key, got[key] / value, [r[key] for r in rates[1:]])


def test_tp_clusters_thunderbolt_net_pair_stops_moving_packets_when_its_path_goes_silent(tmp_path: Path) -> None:
    """node03 <-> node04's thunderbolt-net locks up at 60 s: the wire drops its probes, and both ends'
    thunderbolt0 stay up but move nothing (the host collector calls it stalled); the other nodes
    have no thunderbolt-net link."""
    rig = SimRig(get_scenario("tp-cluster"), 4, tmp_path)
    clock = FakeClock(T0)
    collectors = [HostCollector(HostRoot(node.tree.root), clock) for node in rig.nodes]
    seen: list[dict[str, NetInterfaceReading]] = []
    try:
        for t in (TBNET_SILENT_FROM_S - 2, TBNET_SILENT_FROM_S - 1, TBNET_SILENT_FROM_S + 1,
                  TBNET_SILENT_FROM_S + 4, TBNET_SILENT_FROM_S + 7):
            clock.t = T0 + t
            rig.step(t)
            for index, collector in enumerate(collectors):
                for r in collector.collect():
                    if isinstance(r, NetInterfaceReading) and r.name == "thunderbolt0":
                        assert index in TBNET_PAIR, rig.nodes[index].name
                        seen.append({f"{rig.nodes[index].name}@{t}": r})
    finally:
        rig.close()
    by_key = {k: v for d in seen for k, v in d.items()}
    for name in ("node03", "node04"):
        before = by_key[f"{name}@{TBNET_SILENT_FROM_S - 1}"]
        assert before.kind == "thunderbolt-net" and before.rx_packets_per_s and before.operstate == "up"
        for after_s in (4, 7):
            after = by_key[f"{name}@{TBNET_SILENT_FROM_S + after_s}"]
            assert after.operstate == "up" and after.rx_packets_per_s == 0 and after.tx_packets_per_s == 0
        assert by_key[f"{name}@{TBNET_SILENT_FROM_S + 7}"].stalled


def test_the_port_names_the_interface_the_probed_paths_use(tmp_path: Path) -> None:
    """tp-cluster: the collector finds each node's RoCE port's netdev in the simulated tree, the interface its
    ``roce`` paths are configured on, also while the port is down (what ties a silent path to the port)."""
    scenario = get_scenario("tp-cluster")
    rig = SimRig(scenario, 2, tmp_path)
    try:
        clock = FakeClock(T0)
        collectors = [InfinibandCollector(HostRoot(node.tree.root), clock) for node in rig.nodes]
        netdevs: list[tuple[str, str | None]] = []
        for t in (FLAP_DOWN_S - 5.0, FLAP_DOWN_S + 5.0):
            clock.t = T0 + t
            rig.step(t)
            for collector in collectors:
                (port,) = [r for r in collector.collect() if isinstance(r, InfinibandPortReading)]
                netdevs.append((port.link_state, port.netdev))
    finally:
        rig.close()
    (roce,) = {p.interface for p in scenario.wire_paths(2) if p.path == "roce"}
    assert netdevs == [("ok", roce), ("ok", roce), ("down", roce), ("ok", roce)]
