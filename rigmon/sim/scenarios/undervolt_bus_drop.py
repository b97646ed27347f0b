"""Scenario `undervolt-bus-drop`: four V100-SXM2 ramp together at every DDP step; GPU 3 falls off the bus."""

from __future__ import annotations

from rigmon.sim.gpu import SimNvidiaGpus
from rigmon.sim.host import SimHost, SimInterface
from rigmon.sim.job import SimDdpJob
from rigmon.sim.kmsg import SimKernelLog
from rigmon.sim.load import training_load
from rigmon.sim.node import SimNode
from rigmon.sim.nvml import v100_sxm2_gpus
from rigmon.sim.psu import SimPsuRail

WEAK_GPU = 3
#: When `training_load` starts the job (its default ``start_s``).
TRAINING_START_S = 10.0
#: Supply path of the incident's rig: two paralleled server PSUs through long 12 V leads
#: and a breakout board. A ~1 kW step sags the terminals to about 11.35 V.
PATH_MOHM = 1.75
TRANSIENT_MOHM = 5.0


class UndervoltBusDrop:
    """Incident 1: a 4x V100-SXM2 node on paralleled PSUs; the rail sags at every ramp.

    Training starts at 10 s; every step all four GPUs ramp at once (power peaks above the
    300 W limit) and the rail, read by the ADC on a pty, sags below 11.4 V at the GPU
    terminals. After a few such sags GPU 3 falls off the SXM2 bus (NVML: GPU is lost;
    kernel: Xid 79; its PCI device disappears). The rail drives the drop; nothing is timed.
    The job is a DDP run with one worker per GPU; the worker on GPU 3 exits after the loss.
    """

    name = "undervolt-bus-drop"
    description = "4x V100-SXM2 training; the 12 V rail sags at each ramp and GPU 3 falls off the bus"
    default_nodes = 1

    def build(self, node: SimNode, index: int) -> None:
        kernel_log = SimKernelLog()
        node.devices.append(kernel_log)
        node.devices.append(SimHost(interfaces=[SimInterface("eth0", 10000)], cpu_vendor="intel"))
        gpus = SimNvidiaGpus(
            v100_sxm2_gpus(4, seed=index),
            kernel_log=kernel_log,
            load_fn=lambda t_s: training_load(t_s + 0.1 * index),
            weak_gpu=WEAK_GPU,
        )
        node.devices.append(gpus)
        # The DDP job whose ramps sag the rail; its rank on GPU 3 dies 0.4 s after the GPU does.
        node.devices.append(SimDdpJob(gpus, start_s=TRAINING_START_S - 0.1 * index))
        # After the GPUs: the supply reads their power of this step.
        node.devices.append(SimPsuRail(path_mohm=PATH_MOHM, transient_mohm=TRANSIENT_MOHM,
                                       device_id=f"UV{index:014X}"))

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        node.load = training_load(t_s + 0.1 * index)
