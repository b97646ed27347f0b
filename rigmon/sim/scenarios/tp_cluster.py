"""Scenario `tp-cluster`: 4 Strix Halo nodes doing tensor parallelism over 100 GbE RoCE, a thunderbolt-net
pair and a management network; one slow path, one path that goes silent, one RDMA port that flaps."""

from __future__ import annotations

from rigmon.sim.host import SimHost, SimInterface
from rigmon.sim.load import training_load
from rigmon.sim.node import SimNode
from rigmon.sim.rdma import SimRdma
from rigmon.sim.scenarios.rdma_port_flap import build_strix_roce_node
from rigmon.sim.wire import WirePath

#: The pair on the slow RoCE path (node02 <-> node03): 2-3 ms round trips and 10 % loss (a
#: flaky transceiver: PFC pauses and retransmissions).
SLOW_PAIR = (1, 2)
SLOW_DELAY_US = 2500.0
SLOW_JITTER_US = 500.0
SLOW_LOSS = 0.10
#: The thunderbolt-net pair (node03 <-> node04); the link locks up at `TBNET_SILENT_FROM_S`
#: and stays silent (it needs a re-plug) while both agents' HTTP stays up: the wire drops the
#: probes, and both ends' ``thunderbolt0`` stay up with carrier but move no packet (stalled).
#: Only the pair has a ``thunderbolt0``: thunderbolt-net exists while a host is at the cable's end.
TBNET_PAIR = (2, 3)
TBNET_SILENT_FROM_S = 60.0
#: The node whose RDMA port flaps (the first, so that any node count shows it): down from
#: `FLAP_DOWN_S` for `FLAP_DOWN_FOR_S` every `FLAP_PERIOD_S`.
FLAPPING_NODE = 0
FLAP_PERIOD_S = 120.0
FLAP_DOWN_S = 40.0
FLAP_DOWN_FOR_S = 10.0
#: Round trips the wire adds: RDMA-like (single-digit to tens of microseconds), TCP-like (hundreds).
ROCE_DELAY_US, ROCE_JITTER_US = 12.0, 4.0
TBNET_DELAY_US, TBNET_JITTER_US = 60.0, 20.0
MGMT_DELAY_US, MGMT_JITTER_US = 300.0, 100.0
#: p99 limit of every path in the agents' configuration. The simulator runs every node's agent,
#: responder and prober in one Python process (the relays in a second one): its p50 is the
#: configured delay plus ~50-200 us (the relay's wake-ups and the kernels; the responders' waits
#: are taken off, as on real nodes), but its p99 is threads waiting for a CPU and the GIL on a
#: busy machine (milliseconds; 25-50 ms seen with a dashboard and other work on two cores). So
#: the limit is far above any real one (a real RoCE path would get ~100 us) and the slow path is
#: told by its loss.
PATH_LIMIT_US = 100_000.0
ROCE_LIMIT_US = TBNET_LIMIT_US = MGMT_LIMIT_US = PATH_LIMIT_US


class TpCluster:
    """Issue 21: the seeds' cluster. Real probe datagrams travel between the agents through the
    simulated wire (`rigmon.sim.wire`); RDMA ports are sysfs trees whose counters follow traffic."""

    name = "tp-cluster"
    description = ("4 Strix Halo nodes, TP over 100 GbE RoCE + thunderbolt-net + management network: "
                   "node02<->node03 RoCE slow (2.5 ms) and lossy (10 %), node03<->node04 thunderbolt-net silent after 60 s, "
                   "node01's RDMA port flaps")
    default_nodes = 4

    def build(self, node: SimNode, index: int) -> None:
        tbnet = [SimInterface("thunderbolt0", 40000)] if index in TBNET_PAIR else []
        build_strix_roce_node(node, index, *tbnet)

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        node.load = training_load(t_s + 0.2 * index, start_s=5.0)
        if index in TBNET_PAIR:
            host = next(d for d in node.devices if isinstance(d, SimHost))
            next(n for n in host.interfaces if n.name == "thunderbolt0").stalled = t_s >= TBNET_SILENT_FROM_S
        if index != FLAPPING_NODE:
            return
        port = next(d for d in node.devices if isinstance(d, SimRdma)).port("mlx5_0")
        port.active = not FLAP_DOWN_S <= t_s % FLAP_PERIOD_S < FLAP_DOWN_S + FLAP_DOWN_FOR_S

    def wire_paths(self, nodes: int) -> list[WirePath]:
        """The paths between ``nodes`` nodes: RoCE and management between every pair, thunderbolt-net on one pair."""
        paths: list[WirePath] = []
        for a in range(nodes):
            for b in range(a + 1, nodes):
                if (a, b) == SLOW_PAIR:
                    paths.append(WirePath(a, b, "roce", SLOW_DELAY_US, SLOW_JITTER_US, SLOW_LOSS,
                                          interface="enp1s0f0np0", p99_limit_us=ROCE_LIMIT_US))
                else:
                    paths.append(WirePath(a, b, "roce", ROCE_DELAY_US, ROCE_JITTER_US, interface="enp1s0f0np0",
                                          p99_limit_us=ROCE_LIMIT_US))
                paths.append(WirePath(a, b, "mgmt", MGMT_DELAY_US, MGMT_JITTER_US, interface="eth0",
                                      p99_limit_us=MGMT_LIMIT_US))
                if (a, b) == TBNET_PAIR:
                    paths.append(WirePath(a, b, "tbnet", TBNET_DELAY_US, TBNET_JITTER_US,
                                          silent_from_s=TBNET_SILENT_FROM_S, interface="thunderbolt0",
                                          p99_limit_us=TBNET_LIMIT_US))
        return paths
