"""Scenario `nvme-thermal-throttle`: one enclosure's fan stops, its NVMe pass WCTEMP and throttle its array."""

from __future__ import annotations

from rigmon.sim.node import SimNode
from rigmon.sim.scenarios.model_load import LOAD_BYTES_PER_S, LOAD_START_S, ModelLoad, find_storage

#: When enclosure A's fan stops (simulated seconds), and how well its drives are cooled then: their
#: rise above the air grows ~6-fold, so under the model load they settle near 88 °C, past their
#: 81.85 °C warning threshold about a minute later; throttled, they still settle above it (~82 °C).
FAN_STOP_S = 10.0
STILL_AIR_COOLING = 0.17
#: The array in the enclosure whose fan stops (router 0-1: nvme0n1p1 and nvme1n1p1).
HOT_ARRAY = "md127"


class NvmeThermalThrottle(ModelLoad):
    """The `model-load` box loading weights without pause; enclosure A (md127) loses its fan.

    Its two drives heat up under the load until their composite temperature reaches the warning
    threshold (WCTEMP, hwmon ``temp1_max``): the controllers throttle, md127 reads at a fraction of
    what it is asked and lags md126 (incident 6, "a thermally throttling enclosure"). Its drives were
    partitioned before ``mdadm --create``, as the mdadm man page and most guides do: the arrays hold
    their partitions (``nvme0n1p1``), and a hot drive is still named in its array.
    """

    name = "nvme-thermal-throttle"
    partitioned = True
    description = ("one USB4 enclosure's fan stops: its NVMe reach their warning temperature, throttle, "
                   "and their RAID0 array lags the other")
    default_nodes = 1

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        storage = find_storage(node)
        for array in storage.arrays:
            array.read_target_bytes_per_s = LOAD_BYTES_PER_S.get(array.name, 1.0e9) if t_s >= LOAD_START_S else 0.0
            if array.name == HOT_ARRAY and t_s >= FAN_STOP_S:
                for member in array.members:
                    member.drive.cooling = STILL_AIR_COOLING
        node.load = 0.15
