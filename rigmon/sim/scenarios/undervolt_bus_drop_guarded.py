"""Scenario `undervolt-bus-drop-guarded`: incident 1 with the undervolt guard in enforce mode; no GPU is lost."""

from __future__ import annotations

from dataclasses import dataclass, field

from rigmon.sim.node import SimNode
from rigmon.sim.scenarios.undervolt_bus_drop import UndervoltBusDrop
from rigmon.sim.tree import Tree

#: The ``[guard]`` section the node's agent gets: the policy README "Undervolt guard" describes.
GUARD_CONFIG: dict[str, object] = {
    "enabled": True,
    "mode": "enforce",
    "rail_below_volts": 11.5,
    "rail_count": 1,
    "restore_after_s": 300.0,
}


@dataclass
class GuardSettings:
    """Not hardware: the node's agent configuration for the guard (a `ConfiguresAgent` device)."""

    guard: dict[str, object] = field(default_factory=lambda: dict(GUARD_CONFIG))

    def agent_config(self) -> dict[str, object]:
        """``[guard]`` for the node's agent."""
        return {"guard": dict(self.guard)}

    def advance(self, node: SimNode, t_s: float, dt_s: float) -> None:
        """No physics."""

    def write(self, tree: Tree) -> None:
        """No files."""

    def close(self) -> None:
        """Nothing held."""


class UndervoltBusDropGuarded(UndervoltBusDrop):
    """`undervolt-bus-drop` (same rig, same seed, same sags) with the agent's guard enforcing.

    The first sag at the DDP start engages the guard: it sets application clocks 877/1005 MHz
    on the four V100s through the fake NVML, their ramps draw ~200 W instead of ~330 W, the
    rail stays above 11.5 V and GPU 3 stays on the bus; the job runs ~13 % slower.
    """

    name = "undervolt-bus-drop-guarded"
    description = "undervolt-bus-drop with the undervolt guard enforcing: clocks capped, no GPU lost"

    def build(self, node: SimNode, index: int) -> None:
        super().build(node, index)
        node.devices.append(GuardSettings())
