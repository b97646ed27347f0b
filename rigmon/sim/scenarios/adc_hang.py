"""Scenario `adc-hang`: the rail ADC's firmware hangs with its port still open, then is reset."""

from __future__ import annotations

from rigmon.sim.host import SimHost
from rigmon.sim.load import training_load
from rigmon.sim.node import SimNode
from rigmon.sim.psu import SimPsuRail, psu_rail_of

#: Every cycle the firmware hangs from HANG_AT_S to RESET_AT_S (simulated seconds): long enough
#: for the ADC's staleness (3 s) and the `psu_adc_silent` hold (10 s) with room to spare.
CYCLE_S = 120.0
HANG_AT_S = 20.0
RESET_AT_S = 80.0


def hung_at(t_s: float) -> bool:
    """Whether the ADC's firmware is hung at simulated time ``t_s``."""
    return HANG_AT_S <= t_s % CYCLE_S < RESET_AT_S


class AdcHang:
    """The USB serial port stays enumerated and open, and nothing arrives on it.

    An RP2040 or STM32 whose firmware hangs (an I2C bus locked up by the INA226, a stack
    overflow) keeps its USB CDC port: no unplug, no read error, just silence. The agent must
    say the rail is no longer watched (`psu_adc_silent`), not show the last good reading as the
    rail's, and take the device's reboot when it comes back.
    """

    name = "adc-hang"
    description = "the rail ADC's firmware hangs 20-80 s into every two minutes, its port open and silent"
    default_nodes = 1

    def build(self, node: SimNode, index: int) -> None:
        node.devices.append(SimHost())
        node.devices.append(SimPsuRail(device_id=f"AH{index:014X}"))

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        node.load = training_load(t_s + 0.1 * index)
        rail = psu_rail_of(node)
        if hung_at(t_s):
            rail.hang()
        else:
            rail.reset()
