"""Scenario `rdma-port-flap`: a 4-node tensor-parallel cluster on 100 GbE RoCE; one node's port flaps."""

from __future__ import annotations

from rigmon.sim.gpu import SimAmdGpu
from rigmon.sim.host import SimHost, SimInterface
from rigmon.sim.job import SimAmdJob
from rigmon.sim.load import training_load
from rigmon.sim.node import SimNode
from rigmon.sim.rdma import SimRdma, SimRdmaPort

GIB = 1024**3
#: The node (index) whose RDMA port flaps: the first, so that any node count shows it.
FLAPPING_NODE = 0
#: Every period the port is down from `DOWN_FROM_S` to `DOWN_UNTIL_S`, then comes back slower
#: (at 25 Gb/s, one lane) until `SLOW_UNTIL_S`.
PERIOD_S = 90.0
DOWN_FROM_S = 30.0
DOWN_UNTIL_S = 45.0
SLOW_UNTIL_S = 70.0


class RdmaPortFlap:
    """Issue 21: Strix Halo nodes on 100 GbE RoCE; one node's port goes down, returns at a lower rate, recovers.

    RDMA traffic follows the training load, so the data counters move with the job; the
    flapping port also collects symbol errors while it runs slow.
    """

    name = "rdma-port-flap"
    description = "4 nodes on 100 GbE RoCE; one node's RDMA port flaps and comes back at 25 Gb/s"
    default_nodes = 4

    def build(self, node: SimNode, index: int) -> None:
        build_strix_roce_node(node, index)

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        node.load = training_load(t_s + 0.2 * index, start_s=5.0)
        if index != FLAPPING_NODE:
            return
        port = next(d for d in node.devices if isinstance(d, SimRdma)).port("mlx5_0")
        phase = t_s % PERIOD_S
        port.active = not DOWN_FROM_S <= phase < DOWN_UNTIL_S
        slow = DOWN_UNTIL_S <= phase < SLOW_UNTIL_S
        port.rate_gbps = 25.0 if slow else 100.0
        port.error_rate_per_s = 2.0 if slow else 0.0


def build_strix_roce_node(node: SimNode, index: int, *extra: SimInterface) -> None:
    """A Strix Halo node training on its iGPU, with a 100 GbE RoCE port (``mlx5_0`` on
    ``enp1s0f0np0``), a 2.5 GbE management NIC and ``extra`` interfaces."""
    roce = SimInterface("enp1s0f0np0", 100000)
    node.devices.append(SimHost(cpu_count=32, mem_total_bytes=128 * GIB, cpu_vendor="amd",
                                interfaces=[roce, *extra, SimInterface("eth0", 2500)]))
    node.devices.append(SimRdma(ports=[SimRdmaPort("mlx5_0", rate_gbps=100.0, netdev=roce)]))
    gpu = SimAmdGpu()
    node.devices.append(gpu)
    node.devices.append(SimAmdJob(gpu, start_s=5.0 - 0.2 * index))
