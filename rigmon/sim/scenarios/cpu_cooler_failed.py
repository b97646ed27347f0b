"""Scenario `cpu-cooler-failed`: a training node's CPU cooler stops; its package reaches its critical limit."""

from __future__ import annotations

from rigmon.sim.host import SimHost, SimInterface
from rigmon.sim.load import training_load
from rigmon.sim.node import SimNode

#: When the cooler's pump stops (simulated seconds), and how well the package is cooled then: under the
#: training load its rise above the air grows five-fold, so it reaches TjMax within about ten seconds.
COOLER_STOP_S = 20.0
FAILED_COOLING = 0.2
#: The Xeon's package limits as coretemp lists them (temp1_max, temp1_crit = TjMax).
PACKAGE_MAX_C = 80.0
TJMAX_C = 100.0
#: x86_pkg_temp's trip points as thermald programs them: a passive one (where it starts to throttle, a
#: cooling policy and no limit) and one left unprogrammed (0).
PACKAGE_ZONE_TRIPS = (("passive", 90.0), ("passive", 0.0))


class CpuCoolerFailed:
    """A node trains with a DDP-like load; at 20 s its CPU cooler stops.

    The package heats up until it reaches TjMax, coretemp's critical limit (100 °C), where the CPU
    throttles itself and stays: the data loader and the all-reduce it drives slow every step, and on
    a hotter day it trips THERMTRIP and the node powers off.
    """

    name = "cpu-cooler-failed"
    description = "a node's CPU cooler stops: its package reaches its critical limit (TjMax) and throttles"
    default_nodes = 1

    def build(self, node: SimNode, index: int) -> None:
        node.devices.append(SimHost(interfaces=[SimInterface("eth0", 10000)], cpu_vendor="intel",
                                    cpu_max_c=PACKAGE_MAX_C, cpu_crit_c=TJMAX_C, zone_trips=PACKAGE_ZONE_TRIPS))

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        node.load = training_load(t_s + 0.1 * index)
        if t_s >= COOLER_STOP_S:
            for host in node.devices:
                if isinstance(host, SimHost):
                    host.cooling = FAILED_COOLING
