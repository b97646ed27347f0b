"""Scenario `corroding-connection`: a lug on the 12 V path degrades over simulated weeks (incident 2)."""

from __future__ import annotations

from rigmon.sim.host import SimHost
from rigmon.sim.load import training_load
from rigmon.sim.node import SimNode
from rigmon.sim.psu import SimPsuRail, psu_rail_of

DAY_S = 86400.0
#: Path resistance of a fresh connection and how fast the corroding one grows.
START_MOHM = 0.8
GROWTH_MOHM_PER_DAY = 0.06


def path_mohm_at(t_s: float) -> float:
    """Resistance of the corroding path at simulated time ``t_s``."""
    return START_MOHM + GROWTH_MOHM_PER_DAY * t_s / DAY_S


class CorrodingConnection:
    """One node trains around the clock while its supply path's resistance creeps up.

    The rail at full load loses about 8 mV a day at 140 A; after a month its sags reach the
    level at which GPUs fell off the bus. The path resistance trend shows it long before.
    Run it on an accelerated clock (``--speed 20000`` is a day in a little over 4 s).
    """

    name = "corroding-connection"
    description = "12 V path resistance grows 0.06 mOhm/day under training load (use --speed 20000)"
    default_nodes = 1

    def build(self, node: SimNode, index: int) -> None:
        node.devices.append(SimHost())
        node.devices.append(SimPsuRail(path_mohm=START_MOHM, device_id=f"CC{index:014X}"))

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        node.load = training_load(t_s + 0.1 * index)
        psu_rail_of(node).path_mohm = path_mohm_at(t_s)
