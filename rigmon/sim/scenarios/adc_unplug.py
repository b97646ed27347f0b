"""Scenario `adc-unplug`: the rail ADC's USB cable is pulled and plugged back, again and again."""

from __future__ import annotations

from rigmon.sim.host import SimHost
from rigmon.sim.load import training_load
from rigmon.sim.node import SimNode
from rigmon.sim.psu import SimPsuRail, psu_rail_of

#: Every cycle the ADC is unplugged from UNPLUG_AT_S to REPLUG_AT_S (simulated seconds): twice
#: the default `collector_failing` hold (10 s), so the outage is one the alarm is meant to catch
#: (an outage as long as the hold fired or not depending on how soon the agent saw the unplug).
CYCLE_S = 60.0
UNPLUG_AT_S = 20.0
REPLUG_AT_S = 40.0


def plugged_at(t_s: float) -> bool:
    """Whether the ADC is plugged in at simulated time ``t_s``."""
    return not UNPLUG_AT_S <= t_s % CYCLE_S < REPLUG_AT_S


class AdcUnplug:
    """The pty and its by-id link vanish for 10 s of every minute; the MCU reboots on replug.

    The agent must report the collector as failing while the port is gone, reopen it when
    it comes back, record the device's reboot, and never show a reading it did not get.
    """

    name = "adc-unplug"
    description = "the rail ADC is unplugged 20-40 s into every minute and comes back rebooted"
    default_nodes = 1

    def build(self, node: SimNode, index: int) -> None:
        node.devices.append(SimHost())
        node.devices.append(SimPsuRail(device_id=f"AU{index:014X}"))

    def drive(self, node: SimNode, index: int, t_s: float) -> None:
        node.load = training_load(t_s + 0.1 * index)
        rail = psu_rail_of(node)
        if plugged_at(t_s):
            rail.replug()
        elif rail.plugged:
            rail.unplug()
