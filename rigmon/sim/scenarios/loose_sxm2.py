"""Scenario `loose-sxm2`: one badly seated V100-SXM2 whose NVLink and PCIe error counters rise."""

from __future__ import annotations

from rigmon.sim.gpu import GpuFault, SimNvidiaGpus
from rigmon.sim.host import SimHost, SimInterface
from rigmon.sim.job import SimDdpJob
from rigmon.sim.kmsg import SimKernelLog
from rigmon.sim.load import training_load
from rigmon.sim.node import SimNode
from rigmon.sim.nvml import v100_sxm2_gpus

LOOSE_GPU = 2


class LooseSxm2:
    """Incident 4: GPU 2 sits loose in its SXM2 socket.

    Its PCIe link trained at x8 instead of x16, the NVLink replay and CRC counters of
    links 2 and 3 rise with the load, PCIe replays accumulate, and the kernel logs an
    occasional corrected AER error for it. Nothing is lost yet: the early warning.
    """

    name = "loose-sxm2"
    description = "4x V100-SXM2; GPU 2 badly seated: NVLink replay/CRC counters rising, PCIe at x8"
    default_nodes = 1

    def build(self, node: SimNode, index: int) -> None:
        kernel_log = SimKernelLog()
        node.devices.append(kernel_log)
        node.devices.append(SimHost(interfaces=[SimInterface("eth0", 10000)], cpu_vendor="intel"))
        fault = GpuFault(
            pcie_width=8,
            pcie_replay_per_s=0.5,
            nvlink_replay_per_s={2: 3.0, 3: 1.5},
            nvlink_crc_per_s={2: 8.0, 3: 4.0},
            aer_every_s=30.0,
        )
        gpus = SimNvidiaGpus(
            v100_sxm2_gpus(4, seed=index),
            kernel_log=kernel_log,
            load_fn=lambda t_s: training_load(t_s + 0.1 * index, start_s=2.0),
            faults={LOOSE_GPU: fault},
        )
        node.devices.append(gpus)
        node.devices.append(SimDdpJob(gpus, start_s=2.0 - 0.1 * index, user="carol", uid=1002))

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        node.load = training_load(t_s + 0.1 * index, start_s=2.0)
