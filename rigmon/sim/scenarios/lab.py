"""Scenario `lab`: a mixed cluster where each node has a different story (incident 7)."""

from __future__ import annotations

from rigmon.sim.gpu import SimNvidiaGpus
from rigmon.sim.host import SimHost, SimInterface
from rigmon.sim.job import SimDdpJob
from rigmon.sim.kmsg import SimKernelLog
from rigmon.sim.load import training_load
from rigmon.sim.node import SimNode
from rigmon.sim.nvml import v100_sxm2_gpus
from rigmon.sim.psu import SimPsuRail
from rigmon.sim.scenarios.loose_sxm2 import LooseSxm2
from rigmon.sim.scenarios.tb_retrain_10g import TbRetrain10g
from rigmon.sim.scenarios.undervolt_bus_drop import UndervoltBusDrop

#: Seconds between the healthy nodes' training checkpoints, each marked on the node's timeline.
CHECKPOINT_EVERY_S = 30.0


class HealthyV100:
    """A 4x V100-SXM2 node on a sound supply: the rail dips ~0.1 V at each ramp and recovers."""

    name = "healthy-v100"
    description = "4x V100-SXM2 training on a healthy 12 V supply"
    default_nodes = 1

    def build(self, node: SimNode, index: int) -> None:
        kernel_log = SimKernelLog()
        node.devices.append(kernel_log)
        node.devices.append(SimHost(interfaces=[SimInterface("eth0", 10000), SimInterface("enp65s0f0", 100000)],
                                    cpu_vendor="intel"))
        gpus = SimNvidiaGpus(
            v100_sxm2_gpus(4, seed=index),
            kernel_log=kernel_log,
            load_fn=lambda t_s: training_load(t_s + 0.1 * index),
            weak_gpu=-1,
        )
        node.devices.append(gpus)
        node.devices.append(SimDdpJob(gpus, start_s=10.0 - 0.1 * index, user="bob", uid=1001,
                                      checkpoint_every_s=CHECKPOINT_EVERY_S))
        node.devices.append(SimPsuRail(psus=3, device_id=f"HV{index:014X}"))

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        node.load = training_load(t_s + 0.1 * index)


class Lab:
    """One dashboard over a small lab: which node is the weak one?

    Nodes take their roles in turn: a V100 node whose rail sags until GPU 3 falls off the
    bus, one with a loosely seated SXM2 module, a Strix Halo box whose USB4 enclosure link
    retrains to 10 Gb/s, then healthy V100 nodes. Every role is the scenario of its incident.
    """

    name = "lab"
    description = "mixed cluster: undervolt, loose SXM2, USB4 retrain and healthy V100 nodes on one screen"
    default_nodes = 4

    def __init__(self) -> None:
        self.roles = (UndervoltBusDrop(), LooseSxm2(), TbRetrain10g(), HealthyV100())

    def _role(self, index: int) -> UndervoltBusDrop | LooseSxm2 | TbRetrain10g | HealthyV100:
        return self.roles[index] if index < len(self.roles) else self.roles[-1]

    def build(self, node: SimNode, index: int) -> None:
        self._role(index).build(node, index)

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        self._role(index).drive(node, index, t_s)
