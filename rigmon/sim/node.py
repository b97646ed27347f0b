"""SimNode: one simulated machine, a set of fake devices writing its tree on a simulated clock."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from rigmon.sim.tree import Tree


class SimDevice(Protocol):
    """A piece of fake hardware on a simulated node."""

    def advance(self, node: SimNode, t_s: float, dt_s: float) -> None:
        """Move the device's physics to simulated time ``t_s`` (``dt_s`` after the last call)."""
        ...

    def write(self, tree: Tree) -> None:
        """Write the device's files (or speak its protocol) for the current state."""
        ...

    def close(self) -> None:
        """Release what the device holds (a pty, a thread)."""
        ...


@runtime_checkable
class ConfiguresAgent(Protocol):
    """A device whose agent needs settings to find it (a serial ADC's port)."""

    def agent_config(self) -> dict[str, object]:
        """Agent TOML data (``{"psu": {"port": ...}}``) this device contributes."""
        ...


def merge_config(base: dict[str, object], extra: dict[str, object]) -> dict[str, object]:
    """Merge TOML-shaped data: tables merge key by key, other values in ``extra`` win."""
    out = dict(base)
    for key, value in extra.items():
        current = out.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            out[key] = merge_config(current, value)
        else:
            out[key] = value
    return out


@dataclass
class SimNode:
    """A simulated node.

    Attributes:
        name: node name (the agent reports it).
        tree: its fake root.
        rng: the node's random source, seeded from the scenario seed and the node index.
        devices: fake hardware, advanced in order (loads before the supplies that feed them).
        load: training load from 0 (idle) to 1 (every GPU busy), set by the scenario.
        bus: values devices share (``gpu_power_w`` written by the GPUs and read by the PSU,
            ``rail_volts`` written by the PSU and read by the GPUs on the next step). Kept
            between steps, so a device may read what another wrote in the previous step.
    """

    name: str
    tree: Tree
    rng: random.Random
    devices: list[SimDevice] = field(default_factory=list)
    load: float = 0.0
    bus: dict[str, float] = field(default_factory=dict)
    t_s: float = 0.0
    #: Simulated time the tree is being written for: ``t_s``, or up to one physics grid step
    #: past it when the clock stands between grid points (`SimRig.step`). Devices whose
    #: counters run continuously on real hardware carry them on to this time as they write.
    write_t_s: float = 0.0
    #: Wall time (Unix seconds) of simulated time 0: the rig's clock start (boot and process times follow it).
    wall0_at: float = 1_700_003_600.0
    #: Marks the node's training script puts on its timeline, (text, by), oldest first: what its
    #: ``rigmon mark "epoch 3 checkpoint"`` would post to the agent (`rigmon.sim.mark_poster` posts them).
    marks: list[tuple[str, str]] = field(default_factory=list)

    def step(self, t_s: float) -> None:
        """Advance every device to simulated time ``t_s`` and write the tree."""
        self.advance(t_s)
        self.write()

    def advance(self, t_s: float) -> None:
        """Advance every device's physics to simulated time ``t_s`` without writing."""
        dt_s = max(0.0, t_s - self.t_s)
        self.t_s = self.write_t_s = t_s
        for device in self.devices:
            device.advance(self, t_s, dt_s)

    def write(self) -> None:
        """Write every device's files for the current state."""
        for device in self.devices:
            device.write(self.tree)

    def agent_config(self) -> dict[str, object]:
        """Agent settings the node's devices contribute (merged in device order)."""
        data: dict[str, object] = {}
        for device in self.devices:
            if isinstance(device, ConfiguresAgent):
                data = merge_config(data, device.agent_config())
        return data

    def close(self) -> None:
        """Release every device."""
        for device in self.devices:
            device.close()
