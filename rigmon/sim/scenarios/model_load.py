"""Scenario `model-load`: two RAID0 arrays in USB4 enclosures loading model weights in parallel."""

from __future__ import annotations

from rigmon.sim.host import GIB, SimHost, SimInterface
from rigmon.sim.node import SimNode
from rigmon.sim.storage import SimStorage, strix_enclosure_rig

#: Read rates of the two arrays while loading, as measured on the reference rig.
LOAD_BYTES_PER_S = {"md127": 1.07e9, "md126": 1.10e9}
#: Loading repeats every period: from `LOAD_START_S` for `LOAD_LENGTH_S` seconds.
PERIOD_S = 60.0
LOAD_START_S = 1.0
LOAD_LENGTH_S = 45.0


def find_storage(node: SimNode) -> SimStorage:
    """The node's block layer."""
    return next(d for d in node.devices if isinstance(d, SimStorage))


class ModelLoad:
    """A Strix Halo box reads weights from md127 and md126 (two NVMe each) at once."""

    name = "model-load"
    description = "two RAID0 arrays of two NVMe (USB4 enclosures) loading weights at ~1.07 and ~1.10 GB/s"
    default_nodes = 1
    #: Whether the drives were partitioned before ``mdadm --create`` (the arrays hold ``nvme0n1p1``...).
    partitioned = False

    def build(self, node: SimNode, index: int) -> None:
        node.devices.append(SimHost(cpu_count=32, mem_total_bytes=128 * GIB, cpu_vendor="amd",
                                    interfaces=[SimInterface("enp191s0", 10000)]))
        storage, tb = strix_enclosure_rig(node, partitioned=self.partitioned)
        node.devices.extend([tb, storage])

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        phase = t_s % PERIOD_S
        loading = LOAD_START_S <= phase < LOAD_START_S + LOAD_LENGTH_S
        for array in find_storage(node).arrays:
            array.read_target_bytes_per_s = LOAD_BYTES_PER_S.get(array.name, 1.0e9) if loading else 0.0
        node.load = 0.15 if loading else 0.03
