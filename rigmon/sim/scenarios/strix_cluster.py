"""Scenario `strix-cluster`: AMD Strix Halo mini PCs training one job together."""

from __future__ import annotations

from rigmon.sim.gpu import SimAmdGpu
from rigmon.sim.host import SimHost, SimInterface
from rigmon.sim.job import SimAmdJob
from rigmon.sim.kmsg import SimKernelLog
from rigmon.sim.load import training_load
from rigmon.sim.node import SimNode

GIB = 1024**3


class StrixCluster:
    """Incident 7: several Strix Halo nodes (Radeon 8060S iGPU, 128 GB unified memory) on USB4.

    Each node's iGPU shows in amdgpu sysfs (hwmon power, busy %, DPM clocks, VRAM
    carve-out); there is no NVIDIA driver, so the GPU collector is quietly absent.
    """

    name = "strix-cluster"
    description = "AMD Strix Halo nodes (amdgpu sysfs) training one job over USB4"
    default_nodes = 4

    def build(self, node: SimNode, index: int) -> None:
        node.devices.append(SimKernelLog())
        node.devices.append(SimHost(cpu_count=32, mem_total_bytes=128 * GIB, cpu_vendor="amd",
                                    interfaces=[SimInterface("thunderbolt0", 40000), SimInterface("eth0", 2500)]))
        gpu = SimAmdGpu()
        node.devices.append(gpu)
        node.devices.append(SimAmdJob(gpu, start_s=5.0 - 0.2 * index))

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        node.load = training_load(t_s + 0.2 * index, start_s=5.0)
