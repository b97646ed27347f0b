"""The guard's NVML writes: what it needs of NVML (`GuardActuator`), one step written to a GPU and put back.

`apply_step` and `put_back` talk to the GPUs: the guard calls them on its worker thread, never
on the event loop (`rigmon.agent.guard.worker`). `describe` puts settings into one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from msgspec.structs import replace

from rigmon.hw.nvml_control import (
    ControlDenied,
    ControlFailed,
    ControlUnsupported,
    GpuControlSettings,
    NvmlHung,
    NvmlUnavailable,
)
from rigmon.schema import Frame, GuardGpuSettings, GuardStepName

#: Lowest clock of a locked range: the GPU may still idle down.
LOCKED_MIN_MHZ = 135
#: Power limits closer than this are the same (the driver rounds to its own steps).
LIMIT_TOLERANCE_W = 0.5
#: Errors of one NVML write that leave the guard working (the next trigger tries again).
CALL_ERRORS = (ControlFailed, ControlUnsupported, NvmlHung, NvmlUnavailable)


class GuardActuator(Protocol):
    """What the guard needs from `rigmon.hw.nvml_control.NvmlControl`."""

    probe_transient: bool

    def device_count(self) -> int: ...
    def read(self, index: int) -> GpuControlSettings: ...
    def supported_clocks(self, index: int) -> dict[int, tuple[int, ...]]: ...
    def set_app_clocks(self, index: int, mem_mhz: int, graphics_mhz: int) -> GpuControlSettings: ...
    def reset_app_clocks(self, index: int) -> GpuControlSettings: ...
    def set_locked_clocks(self, index: int, min_mhz: int, max_mhz: int) -> None: ...
    def reset_locked_clocks(self, index: int) -> None: ...
    def set_power_limit(self, index: int, limit_mw: int) -> GpuControlSettings: ...
    def reset_power_limit(self, index: int) -> GpuControlSettings: ...
    def set_persistence(self, index: int, enabled: bool) -> None: ...
    def probe(self) -> str | None: ...
    def close(self) -> None: ...


def describe(settings: Sequence[GuardGpuSettings]) -> str:
    """One line for events and logs: ``gpu0 877/1005 MHz lock<=1005 200 W; gpu1 ...``."""
    parts = []
    for s in settings:
        bits = [f"gpu{s.index}"]
        if s.app_clock_mem_mhz is not None or s.app_clock_graphics_mhz is not None:
            bits.append(f"{s.app_clock_mem_mhz}/{s.app_clock_graphics_mhz} MHz")
        if s.locked_clock_max_mhz is not None:
            bits.append(f"lock<={s.locked_clock_max_mhz}")
        if s.power_limit_w is not None:
            bits.append(f"{s.power_limit_w:g} W")
        parts.append(" ".join(bits))
    return "; ".join(parts)


def from_control(s: GpuControlSettings, locked: int | None = None) -> GuardGpuSettings:
    """NVML's settings of a GPU as the guard records them (power limit in watts)."""
    return GuardGpuSettings(
        index=s.index, app_clock_mem_mhz=s.app_clock_mem_mhz, app_clock_graphics_mhz=s.app_clock_graphics_mhz,
        locked_clock_max_mhz=locked,
        power_limit_w=None if s.power_limit_mw is None else s.power_limit_mw / 1000.0,
    )


def from_frame(frame: Frame, index: int) -> GuardGpuSettings:
    """GPU ``index``'s settings as a frame reported them (when NVML cannot be read)."""
    for g in frame.readings.gpus:
        if g.index == index:
            return GuardGpuSettings(index=index, app_clock_mem_mhz=g.clock_app_mem_mhz,
                                    app_clock_graphics_mhz=g.clock_app_graphics_mhz, power_limit_w=g.power_limit_w)
    return GuardGpuSettings(index=index)


def apply_step(control: GuardActuator, index: int, step: GuardStepName, planned: GuardGpuSettings,
               original_persistence: dict[int, bool | None]) -> GuardGpuSettings:
    """Write ``planned``, the settings of ``step``, to GPU ``index``; returns them as the driver took them.

    Application clocks also switch persistence mode on, its original state recorded in
    ``original_persistence`` for `put_back` (no record when the switch was refused).

    Raises:
        ControlDenied, ControlFailed, ControlUnsupported, NvmlHung, NvmlUnavailable: the write failed.
    """
    if step == "app_clocks":
        if planned.app_clock_mem_mhz is None or planned.app_clock_graphics_mhz is None:
            raise ControlFailed(f"GPU {index}: no application-clock pair (configure app_clocks_mhz)")
        if index not in original_persistence:
            original_persistence[index] = control.read(index).persistence
        if original_persistence[index] is False:
            # Without persistence mode the driver may unload between jobs and drop the clocks.
            # It needs root even where application clocks do not (nvidia-smi -acp UNRESTRICTED);
            # the agent's own NVML handle keeps the driver loaded meanwhile.
            try:
                control.set_persistence(index, True)
            except (ControlUnsupported, ControlFailed, ControlDenied):
                # Not switched on by the guard: not the guard's to switch off (`put_back`), even
                # when someone switches it on meanwhile.
                del original_persistence[index]
        got = control.set_app_clocks(index, planned.app_clock_mem_mhz, planned.app_clock_graphics_mhz)
        return replace(planned, app_clock_mem_mhz=got.app_clock_mem_mhz,
                       app_clock_graphics_mhz=got.app_clock_graphics_mhz)
    if step == "locked_clocks":
        if planned.locked_clock_max_mhz is None:
            raise ControlFailed(f"GPU {index}: no clock to lock to")
        control.set_locked_clocks(index, LOCKED_MIN_MHZ, planned.locked_clock_max_mhz)
        return planned
    assert planned.power_limit_w is not None
    got = control.set_power_limit(index, int(planned.power_limit_w * 1000))
    # A driver that does not report the limit still took it: the planned one is in force (and is
    # what a restore must undo).
    return replace(planned, power_limit_w=planned.power_limit_w if got.power_limit_mw is None
                   else got.power_limit_mw / 1000.0)


def put_back(control: GuardActuator, index: int, target: GuardGpuSettings, before: GuardGpuSettings,
             original_persistence: dict[int, bool | None]) -> tuple[GuardGpuSettings, tuple[str, ...]]:
    """Restore GPU ``index`` from ``before`` to ``target``, its original settings.

    Only what the guard still has in force goes back: an application-clock pair or a power limit
    that differs from ``before`` now (``nvidia-smi -ac``/``-pl`` by the operator while the guard
    was engaged, or while the agent was down) is the operator's and is left as it is. Persistence
    mode is switched off only where the guard switched it on and it still runs the guard's
    application clocks (persistence on alone cannot tell the guard's switch from ``nvidia-smi -pm 1``).

    Returns:
        The settings as NVML reads them afterwards, and one note per setting left as set elsewhere.

    Raises:
        ControlDenied, ControlFailed, ControlUnsupported, NvmlHung, NvmlUnavailable: a write failed.
    """
    got = now = control.read(index)
    app_elsewhere, limit_elsewhere = set_elsewhere(got, before)
    kept: list[str] = []
    if before.locked_clock_max_mhz is not None:
        try:
            control.reset_locked_clocks(index)
        except ControlUnsupported:
            pass
    if app_elsewhere:
        kept.append(f"gpu{index} application clocks {got.app_clock_mem_mhz}/{got.app_clock_graphics_mhz} MHz")
    elif target.app_clock_mem_mhz is not None and target.app_clock_graphics_mhz is not None:
        got = control.set_app_clocks(index, target.app_clock_mem_mhz, target.app_clock_graphics_mhz)
    else:
        got = control.reset_app_clocks(index)
    if limit_elsewhere:
        assert got.power_limit_mw is not None
        kept.append(f"gpu{index} power limit {got.power_limit_mw / 1000:g} W")
    elif target.power_limit_w is not None and before.power_limit_w != target.power_limit_w:
        got = control.set_power_limit(index, int(target.power_limit_w * 1000))
    elif target.power_limit_w is None and before.power_limit_w is not None:
        # The limit before the guard was not known (the driver did not say): the board's default,
        # never the guard's cap left in force.
        got = control.reset_power_limit(index)
    # Switched on by the guard and still on (not off again by ``nvidia-smi -pm 0``). Under
    # application clocks someone else set (the operator's own, a GPU reset) it is theirs too.
    switched_on = original_persistence.get(index) is False and now.persistence is not False
    if switched_on and app_elsewhere:
        kept.append(f"gpu{index} persistence mode on")
    elif switched_on:
        try:
            control.set_persistence(index, False)
        except (ControlUnsupported, ControlFailed, ControlDenied):
            pass
    return from_control(got), tuple(kept)


def set_elsewhere(now: GpuControlSettings, guard_set: GuardGpuSettings) -> tuple[bool, bool]:
    """Whether GPU's application clocks and power limit ``now`` differ from what the guard set
    (``guard_set``): someone else changed them since. Unknown on either side is no difference."""
    app = (now.app_clock_mem_mhz is not None and now.app_clock_graphics_mhz is not None
           and guard_set.app_clock_mem_mhz is not None and guard_set.app_clock_graphics_mhz is not None
           and (now.app_clock_mem_mhz, now.app_clock_graphics_mhz)
           != (guard_set.app_clock_mem_mhz, guard_set.app_clock_graphics_mhz))
    limit = (now.power_limit_mw is not None and guard_set.power_limit_w is not None
             and abs(now.power_limit_mw / 1000 - guard_set.power_limit_w) >= LIMIT_TOLERANCE_W)
    return app, limit


def adopt(original: GuardGpuSettings, known: GuardGpuSettings, real: GuardGpuSettings) -> GuardGpuSettings:
    """``original`` with the settings someone else changed (``known`` the guard set, ``real`` in force)
    taken from ``real``: a restore leaves what the operator set, instead of writing over it."""
    if (real.app_clock_mem_mhz, real.app_clock_graphics_mhz) != (known.app_clock_mem_mhz, known.app_clock_graphics_mhz):
        original = replace(original, app_clock_mem_mhz=real.app_clock_mem_mhz,
                           app_clock_graphics_mhz=real.app_clock_graphics_mhz)
    if real.power_limit_w != known.power_limit_w:
        original = replace(original, power_limit_w=real.power_limit_w)
    return original
