"""Scenario `healthy`: nodes training normally; nothing should alarm."""

from __future__ import annotations

from rigmon.sim.host import SimHost, SimInterface
from rigmon.sim.load import training_load
from rigmon.sim.node import SimNode


class Healthy:
    """Every node trains with a DDP-like load; all hardware in order."""

    name = "healthy"
    description = "nodes training normally, every link and supply in order"
    default_nodes = 2

    def build(self, node: SimNode, index: int) -> None:
        node.devices.append(SimHost(interfaces=[SimInterface("eth0", 10000), SimInterface("enp65s0f0", 100000)]))

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        # Nodes of one job start together; a small per-node offset keeps them distinguishable.
        node.load = training_load(t_s + 0.1 * index)
