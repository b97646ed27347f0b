"""Scenario `tb-retrain-10g`: a USB4 enclosure link retrains from 20 to 10 Gb/s per lane, later recovers."""

from __future__ import annotations

from rigmon.sim.gpu import SimAmdGpu
from rigmon.sim.host import GIB, SimHost, SimInterface
from rigmon.sim.node import SimNode
from rigmon.sim.scenarios.model_load import find_storage
from rigmon.sim.storage import strix_enclosure_rig
from rigmon.sim.thunderbolt import SimThunderbolt

#: The link of this router retrains.
ROUTER = "0-1"
#: Repeats every period: degraded from `DEGRADED_FROM_S` to `DEGRADED_UNTIL_S`.
PERIOD_S = 120.0
DEGRADED_FROM_S = 20.0
DEGRADED_UNTIL_S = 80.0
#: Both arrays stream a checkpoint hard enough that a 20 Gb/s tunnel limits the first one.
READ_BYTES_PER_S = 3.0e9


class TbRetrain10g:
    """Two enclosures stream a checkpoint; enclosure 0-1's USB4 link drops to 10 Gb/s a lane."""

    name = "tb-retrain-10g"
    description = "USB4 enclosure link drops from 20 to 10 Gb/s per lane (array lags), later recovers"
    default_nodes = 1

    def build(self, node: SimNode, index: int) -> None:
        node.devices.append(SimHost(cpu_count=32, mem_total_bytes=128 * GIB, cpu_vendor="amd",
                                    interfaces=[SimInterface("enp191s0", 10000)]))
        storage, tb = strix_enclosure_rig(node)
        tb.retimers.append("0-0:1.1")
        node.devices.extend([tb, storage])
        # Last: it draws its random seed after the others, which keep theirs.
        node.devices.append(SimAmdGpu())  # the Strix Halo's Radeon 8060S iGPU

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        phase = t_s % PERIOD_S
        tb = next(d for d in node.devices if isinstance(d, SimThunderbolt))
        tb.router(ROUTER).speed_gbps = 10 if DEGRADED_FROM_S <= phase < DEGRADED_UNTIL_S else 20
        for array in find_storage(node).arrays:
            array.read_target_bytes_per_s = READ_BYTES_PER_S if t_s >= 1.0 else 0.0
        node.load = 0.2
