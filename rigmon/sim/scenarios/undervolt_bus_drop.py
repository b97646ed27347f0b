"""Scenario `undervolt-bus-drop`: four V100-SXM2 ramp together at every DDP step; GPU 3 falls off the bus."""

from __future__ import annotations

from rigmon.sim.gpu import SimNvidiaGpus
from rigmon.sim.host import SimHost, SimInterface
from rigmon.sim.kmsg import SimKernelLog
from rigmon.sim.load import training_load
from rigmon.sim.node import SimNode
from rigmon.sim.nvml import v100_sxm2_gpus

#: Simulated second at which GPU 3 drops when the rail has not already dropped it.
DROP_AT_S = 40.0
WEAK_GPU = 3


class UndervoltBusDrop:
    """Incident 1: a 4x V100-SXM2 node on paralleled PSUs; the rail sags at every ramp.

    Training starts at 10 s; every step all four GPUs ramp at once (power peaks above the
    300 W limit). GPU 3 falls off the SXM2 bus at `DROP_AT_S` (NVML: GPU is lost; kernel:
    Xid 79; its PCI device disappears), or earlier when the PSU model's
    ``node.bus["rail_volts"]`` stays below 11.4 V.
    """

    name = "undervolt-bus-drop"
    description = "4x V100-SXM2 training; the 12 V rail sags at each ramp and GPU 3 falls off the bus"
    default_nodes = 1

    def build(self, node: SimNode, index: int) -> None:
        kernel_log = SimKernelLog()
        node.devices.append(kernel_log)
        node.devices.append(SimHost(interfaces=[SimInterface("eth0", 10000)]))
        node.devices.append(SimNvidiaGpus(
            v100_sxm2_gpus(4, seed=index),
            kernel_log=kernel_log,
            load_fn=lambda t_s: training_load(t_s + 0.1 * index),
            weak_gpu=WEAK_GPU,
        ))

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        node.load = training_load(t_s + 0.1 * index)
        if t_s >= DROP_AT_S:
            for device in node.devices:
                if isinstance(device, SimNvidiaGpus):
                    device.drop(WEAK_GPU, "scenario timeline")
