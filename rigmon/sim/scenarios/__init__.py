"""Scenario registry: named, seeded simulated rigs, one per incident of DESIGN.md."""

from __future__ import annotations

from typing import Protocol

from rigmon.sim.node import SimNode
from rigmon.sim.scenarios.adc_garbage import AdcGarbage
from rigmon.sim.scenarios.adc_hang import AdcHang
from rigmon.sim.scenarios.adc_unplug import AdcUnplug
from rigmon.sim.scenarios.bench_node import BenchNode
from rigmon.sim.scenarios.corroding_connection import CorrodingConnection
from rigmon.sim.scenarios.cpu_cooler_failed import CpuCoolerFailed
from rigmon.sim.scenarios.healthy import Healthy
from rigmon.sim.scenarios.lab import HealthyV100, Lab
from rigmon.sim.scenarios.loose_sxm2 import LooseSxm2
from rigmon.sim.scenarios.md_degraded import MdDegraded
from rigmon.sim.scenarios.model_load import ModelLoad
from rigmon.sim.scenarios.net_link_flap import NetLinkFlap
from rigmon.sim.scenarios.nvme_link_gen3 import NvmeLinkGen3
from rigmon.sim.scenarios.nvme_thermal_throttle import NvmeThermalThrottle
from rigmon.sim.scenarios.rdma_port_flap import RdmaPortFlap
from rigmon.sim.scenarios.strix_cluster import StrixCluster
from rigmon.sim.scenarios.strix_usb4 import StrixUsb4
from rigmon.sim.scenarios.tb_retrain_10g import TbRetrain10g
from rigmon.sim.scenarios.tp_cluster import TpCluster
from rigmon.sim.scenarios.undervolt_bus_drop import UndervoltBusDrop
from rigmon.sim.scenarios.undervolt_bus_drop_guarded import UndervoltBusDropGuarded


class Scenario(Protocol):
    """A simulated rig: what each node holds and what happens to it over time."""

    name: str
    description: str
    default_nodes: int

    def build(self, node: SimNode, index: int) -> None:
        """Add the node's fake devices (called once per node, index from 0)."""
        ...

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        """Apply the scenario's timeline at simulated time ``t_s`` (before devices advance)."""
        ...


SCENARIOS: dict[str, Scenario] = {
    "healthy": Healthy(),
    "healthy-v100": HealthyV100(),
    "lab": Lab(),
    "model-load": ModelLoad(),
    "tb-retrain-10g": TbRetrain10g(),
    "md-degraded": MdDegraded(),
    "nvme-link-gen3": NvmeLinkGen3(),
    "nvme-thermal-throttle": NvmeThermalThrottle(),
    "strix-usb4": StrixUsb4(),
    "undervolt-bus-drop": UndervoltBusDrop(),
    "undervolt-bus-drop-guarded": UndervoltBusDropGuarded(),
    "loose-sxm2": LooseSxm2(),
    "strix-cluster": StrixCluster(),
    "rdma-port-flap": RdmaPortFlap(),
    "net-link-flap": NetLinkFlap(),
    "tp-cluster": TpCluster(),
    "corroding-connection": CorrodingConnection(),
    "cpu-cooler-failed": CpuCoolerFailed(),
    "adc-unplug": AdcUnplug(),
    "adc-garbage": AdcGarbage(),
    "adc-hang": AdcHang(),
    "bench-node": BenchNode(),
}
