"""``[guard]``: the opt-in undervolt guard."""

from __future__ import annotations

from typing import Literal

import msgspec


GuardMode = Literal["dry-run", "enforce"]


class GuardSection(msgspec.Struct, frozen=True, gc=False):
    """``[guard]``: the opt-in undervolt guard (issue 20; README "Undervolt guard").

    When the 12 V rail sags it caps the GPUs' clocks in steps (application clocks, then
    locked clocks, then a power limit) and restores the previous settings once the rail has
    been healthy for ``restore_after_s``. Off by default; ``mode = "dry-run"`` only reports
    what it would do.
    """

    enabled: bool = False
    """Run the guard at all."""
    mode: GuardMode = "dry-run"
    """``dry-run``: events say what it would do; ``enforce``: it sets the GPUs' clocks (needs root)."""
    rail_below_volts: float = 11.5
    """Trigger: an ADC window whose minimum is below this counts as a sag."""
    rail_count: int = 1
    """Trigger: this many sags within ``rail_window_s`` engage the guard."""
    rail_window_s: float = 60.0
    """Seconds over which sags are counted."""
    alarm_rules: tuple[str, ...] = ("psu_rail_low_critical",)
    """Trigger: any of these alarm rules firing (empty: alarms do not trigger)."""
    throttle_gpus: int = 2
    """Trigger: this many GPUs at once reporting ``hw_power_brake_slowdown`` or ``hw_slowdown``
    (0: throttle reasons do not trigger)."""
    app_clocks_mhz: tuple[int, ...] = ()
    """Step 1: application clocks as ``[memory, graphics]`` MHz (``[877, 1005]`` on a V100);
    empty: the highest memory clock and the largest supported graphics clock at most
    ``derive_fraction`` of the GPU's maximum."""
    derive_fraction: float = 0.66
    """Graphics clock of the derived pair as a fraction of the maximum (0.66 x 1530 -> 1005 on a V100)."""
    locked_clocks: bool = True
    """Step 2: lock the graphics clock to at most the step-1 graphics clock (where the GPU supports it)."""
    power_limit_w: float = 200.0
    """Step 3: power limit in watts (0: no power-limit step). The V100 overshoots it: last resort."""
    step_after_s: float = 15.0
    """A new trigger this long after the last step takes the next step."""
    restore_after_s: float = 300.0
    """Seconds without any trigger, and with the rail (and, for ``throttle_gpus``, the GPUs) read all along,
    before the previous settings are restored."""
    max_actions_per_hour: int = 6
    """Ceiling on engage/step actions in any hour (restoring is always allowed)."""
    call_timeout_s: float = 5.0
    """An NVML call that takes longer is abandoned and reported (it never stalls sampling)."""
    gpus: tuple[int, ...] = ()
    """GPU indices to act on; empty: every GPU NVML lists."""

    def __post_init__(self) -> None:
        if not 5.0 <= self.rail_below_volts <= 15.0:
            raise ValueError("rail_below_volts must be between 5 and 15")
        if not 1 <= self.rail_count <= 1000:
            raise ValueError("rail_count must be 1..1000")
        if not 0 < self.rail_window_s <= 86400:
            raise ValueError("rail_window_s must be in (0, 86400]")
        if not 0 <= self.throttle_gpus <= 64:
            raise ValueError("throttle_gpus must be 0..64")
        if self.app_clocks_mhz:
            if len(self.app_clocks_mhz) != 2:
                raise ValueError("app_clocks_mhz must be [memory, graphics] (two numbers) or empty")
            for mhz in self.app_clocks_mhz:
                if not 100 <= mhz <= 20000:
                    raise ValueError(f"app_clocks_mhz: {mhz} MHz is out of range 100..20000")
        if not 0.2 <= self.derive_fraction <= 1.0:
            raise ValueError("derive_fraction must be between 0.2 and 1")
        if self.power_limit_w != 0 and not 50 <= self.power_limit_w <= 1000:
            raise ValueError("power_limit_w must be 0 (no power-limit step) or 50..1000")
        if not 0 <= self.step_after_s <= 3600:
            raise ValueError("step_after_s must be 0..3600")
        if not 1 <= self.restore_after_s <= 86400:
            raise ValueError("restore_after_s must be 1..86400")
        if not 1 <= self.max_actions_per_hour <= 1000:
            raise ValueError("max_actions_per_hour must be 1..1000")
        if not 0 < self.call_timeout_s <= 60:
            raise ValueError("call_timeout_s must be in (0, 60]")
        for index in self.gpus:
            if not 0 <= index < 64:
                raise ValueError(f"gpus: {index} is not a GPU index (0..63)")
        for index in set(self.gpus):
            if self.gpus.count(index) > 1:
                # Each GPU would be capped (and its writes counted) once per mention.
                raise ValueError(f"gpus: {index} is listed more than once")
