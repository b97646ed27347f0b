"""Scenario `bench-node`: every simulated source on one node, for the agent cost benchmarks."""

from __future__ import annotations

from rigmon.sim.gpu import SimNvidiaGpus
from rigmon.sim.host import SimHost, SimInterface
from rigmon.sim.kmsg import SimKernelLog
from rigmon.sim.load import training_load
from rigmon.sim.node import SimNode
from rigmon.sim.nvml import v100_sxm2_gpus
from rigmon.sim.psu import SimPsuRail
from rigmon.sim.rdma import SimRdma, SimRdmaPort
from rigmon.sim.scenarios.model_load import LOAD_BYTES_PER_S, find_storage
from rigmon.sim.storage import strix_enclosure_rig

#: The arrays read weights for the first `LOAD_LENGTH_S` of every `PERIOD_S` (checkpoint-like load).
PERIOD_S = 60.0
LOAD_LENGTH_S = 20.0


class BenchNode:
    """A V100-SXM2 node with two USB4 RAID0 enclosures, two NICs and an RM1 ADC, training.

    Args:
        gpus: NVIDIA GPUs behind the fake NVML (their PCI dirs are in the tree too); the PSUs
            are sized for them.
        adc_window_ms: the ADC's window (100 ms: 10 lines a second).
    """

    name = "bench-node"
    description = "benchmark node: 4 V100-SXM2, two RAID0 arrays of two NVMe on USB4, 10 and 100 GbE (RoCE), RM1 ADC"
    default_nodes = 1

    def __init__(self, gpus: int = 4, adc_window_ms: int = 1000) -> None:
        self.gpus = gpus
        self.adc_window_ms = adc_window_ms

    def build(self, node: SimNode, index: int) -> None:
        kernel_log = SimKernelLog()
        node.devices.append(kernel_log)
        node.devices.append(SimHost(interfaces=[SimInterface("eth0", 10000), SimInterface("enp65s0f0", 100000)]))
        # The 100 GbE NIC is a ConnectX with RoCE: its RDMA port is a source like any other.
        node.devices.append(SimRdma(ports=[SimRdmaPort("mlx5_0", rate_gbps=100.0)]))
        node.devices.append(SimNvidiaGpus(
            v100_sxm2_gpus(self.gpus, seed=index),
            kernel_log=kernel_log,
            load_fn=lambda t_s: training_load(t_s + 0.1 * index, start_s=1.0),
        ))
        storage, tb = strix_enclosure_rig(node)
        node.devices.extend([tb, storage])
        # After the GPUs: the rail reads their power of the same step. Two 1100 W PSUs carry four
        # V100s; more GPUs get one 1600 W PSU per two, so the benchmark node stays healthy (with
        # two 1100 W PSUs, eight V100s at full load fold the rail back and one falls off the bus),
        # and a bus bar of half the resistance, as a chassis built for eight carries: on the four-GPU
        # path, 200 A of eight V100s at full load dips the rail below the 11.7 V warning limit.
        if self.gpus <= 4:
            rail = SimPsuRail(win_ms=self.adc_window_ms, device_id=f"BN{index:014X}")
        else:
            rail = SimPsuRail(psus=(self.gpus + 1) // 2, psu_rated_w=1600.0, path_mohm=0.4,
                              win_ms=self.adc_window_ms, device_id=f"BN{index:014X}")
        node.devices.append(rail)

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        node.load = training_load(t_s + 0.1 * index, start_s=1.0)
        loading = t_s % PERIOD_S < LOAD_LENGTH_S
        for array in find_storage(node).arrays:
            array.read_target_bytes_per_s = LOAD_BYTES_PER_S.get(array.name, 1.0e9) if loading else 0.0
