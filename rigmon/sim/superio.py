"""A simulated Super I/O chip (a Nuvoton NCT6798D, as the kernel's nct6775 driver shows it): its platform
device, its hwmon registration with the ``device`` link by which lm-sensors names it (``nct6798-isa-0290``),
its voltage inputs (the board's rails, behind the dividers the board has) and its temperature inputs."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from rigmon.sim.hwmon import SimHwmon
from rigmon.sim.node import SimNode
from rigmon.sim.tree import Tree

#: The bus a Super I/O's platform device is on.
PLATFORM_BUS = "/sys/bus/platform"
#: The chip's ADC step (mV) at the pin; 16 mV for the 3.3 V inputs it halves itself, which the driver
#: reports as the rail's voltage.
ADC_STEP_MV = 8


@dataclass(frozen=True)
class SuperIoInput:
    """One voltage input of the chip: the rail behind it and what the chip reads of it.

    Args:
        channel: its ``inN``.
        rail_volts: the rail's voltage with the node idle.
        load_drop_volts: how much lower it is with the node at full load (a CPU core's load line, a
            board rail's cables and connectors).
        divider: the board's divider before the pin (12 V behind 12:1 reads 1.008 V): the driver does not
            know it, and reports the pin's voltage; sensors.conf's ``compute`` line, or rigmon's
            ``[psu.hwmon] scale``, multiplies it back.
        halved: the chip halves it itself (AVSB, 3VCC, 3VSB, VBAT): the driver reports the rail's voltage,
            in twice the ADC's steps.
        min_volts / max_volts: the limits the firmware programmed (pin volts, ``inN_min``/``inN_max``),
            ``None`` for none listed.
    """

    channel: str
    rail_volts: float
    load_drop_volts: float = 0.0
    divider: float = 1.0
    halved: bool = False
    min_volts: float | None = None
    max_volts: float | None = None

    def pin_millivolts(self, load: float) -> int:
        """What the chip reads at ``load`` (0-1), in mV, in the ADC's steps."""
        pin_mv = (self.rail_volts - self.load_drop_volts * load) / self.divider * 1000
        step = 2 * ADC_STEP_MV if self.halved else ADC_STEP_MV
        return round(pin_mv / step) * step


#: An NCT6798D on a workstation board: CPU core voltage, +5 V and +12 V behind the board's dividers (5:1,
#: 12:1), the 3.3 V rails it halves itself, the RTC battery. The nct6775 driver labels no voltage input.
NCT6798_INPUTS = (
    SuperIoInput("in0", 1.05, load_drop_volts=0.06),
    SuperIoInput("in1", 5.04, load_drop_volts=0.04, divider=5.0, min_volts=0.952, max_volts=1.064),
    SuperIoInput("in2", 3.36, halved=True),
    SuperIoInput("in3", 3.34, load_drop_volts=0.02, halved=True),
    SuperIoInput("in4", 12.10, load_drop_volts=0.15, divider=12.0, min_volts=0.952, max_volts=1.064),
    SuperIoInput("in7", 3.39, halved=True),
    SuperIoInput("in8", 3.18, halved=True),
)


@dataclass
class SimSuperIo:
    """A Super I/O chip as the nct6775 driver registers it: the platform device ``nct6775.<port>`` (the I/O
    port of its hardware monitor in decimal: ``nct6775.656`` for 0x290, ``nct6798-isa-0290`` to lm-sensors)
    on the platform bus, and its hwmon device below it (`SimHwmon`, ``device`` link to the platform device).

    Args:
        chip: the name its hwmon device reports (the chip the driver found).
        port: the I/O port of its hardware monitor.
        inputs: its voltage inputs.
        hwmon_number: its ``hwmonN``: the kernel numbers hwmon devices in probe order, so another boot of
            the same node may give it another number.
    """

    chip: str = "nct6798"
    port: int = 0x290
    inputs: tuple[SuperIoInput, ...] = NCT6798_INPUTS
    hwmon_number: int = 1
    #: The board's temperature (°C) with the node idle; SYSTIN reads it, CPUTIN a few degrees more.
    board_temp_c: float = 32.0
    load: float = 0.0
    #: Its hwmon device: a driver reload registers it again (`SimHwmon.reregister`).
    hwmon: SimHwmon = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.hwmon = SimHwmon(parent=f"{self.device}/hwmon", number=self.hwmon_number)

    @property
    def device(self) -> str:
        """Its platform device's directory (``/sys/devices/platform/nct6775.656``)."""
        return f"/sys/devices/platform/nct6775.{self.port}"

    def advance(self, node: SimNode, t_s: float, dt_s: float) -> None:
        self.load = node.load

    def write(self, tree: Tree) -> None:
        if not tree.path(f"{self.device}/subsystem").is_symlink():
            tree.symlink(f"{self.device}/subsystem", os.path.relpath(PLATFORM_BUS, self.device))
        fixed = {"name": f"{self.chip}\n", "temp1_label": "SYSTIN\n", "temp2_label": "CPUTIN\n"}
        files: dict[str, str] = {}
        for vin in self.inputs:
            for limit, volts in (("min", vin.min_volts), ("max", vin.max_volts)):
                if volts is not None:
                    fixed[f"{vin.channel}_{limit}"] = f"{round(volts * 1000)}\n"
            pin_mv = vin.pin_millivolts(self.load)
            files[f"{vin.channel}_input"] = f"{pin_mv}\n"
            low = vin.min_volts is not None and pin_mv < vin.min_volts * 1000
            high = vin.max_volts is not None and pin_mv > vin.max_volts * 1000
            files[f"{vin.channel}_alarm"] = f"{int(low or high)}\n"
        board_c = self.board_temp_c + 6.0 * self.load
        files["temp1_input"] = f"{round(board_c * 1000)}\n"
        files["temp2_input"] = f"{round((board_c + 4.0 + 10.0 * self.load) * 1000)}\n"
        self.hwmon.write(tree, files, fixed=fixed)

    def close(self) -> None:
        """Nothing to release."""
