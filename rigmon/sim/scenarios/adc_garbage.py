"""Scenario `adc-garbage`: a flaky serial link: noise, cut lines, flipped bits, bad checksums."""

from __future__ import annotations

from rigmon.sim.host import SimHost
from rigmon.sim.load import training_load
from rigmon.sim.node import SimNode
from rigmon.sim.psu import SimPsuRail

#: Share of the ADC's lines that are damaged on the way.
GARBAGE_FRACTION = 0.3


class AdcGarbage:
    """Three lines in ten are damaged, some claiming a 5 V rail behind a wrong checksum.

    The rail is healthy: any reading below 11.5 V, or any crash, is a bug in the reader.
    """

    name = "adc-garbage"
    description = "30% of the rail ADC's lines are noise, cut, bit-flipped or fail their checksum"
    default_nodes = 1

    def build(self, node: SimNode, index: int) -> None:
        node.devices.append(SimHost())
        rail = SimPsuRail(device_id=f"AG{index:014X}")
        rail.garbage = GARBAGE_FRACTION
        node.devices.append(rail)

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        node.load = training_load(t_s + 0.1 * index)
