"""Persistence mode at the guard's restore: switched off only where the guard switched it on, like the
other settings the operator may have set meanwhile."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.agent.guard_helpers import ENFORCE, Clock, Events, engaged, frame, settle

SET_PERSISTENCE = "nvmlDeviceSetPersistenceMode"


async def restore(service, clock: Clock) -> None:  # type: ignore[no-untyped-def]
    clock.t += 31
    service.on_frame(frame(clock.t, 11.9))
    await settle(service)


async def test_persistence_the_guard_could_not_switch_on_is_not_switched_off(tmp_path: Path,
                                                                            machine: FakeNvmlMachine) -> None:
    # GPU 1 refuses the guard's switch; the operator runs nvidia-smi -pm 1 on it while capped.
    machine.fail("not_supported", gpu=1, symbols=[SET_PERSISTENCE])
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await engaged(tmp_path, ENFORCE, events, clock)
        assert [g.persistence_mode for g in machine.gpus] == [1, 0, 1, 1]
        machine.heal("not_supported", gpu=1)
        machine.gpus[1].persistence_mode = 1
        await restore(service, clock)
        assert events.kinds()[-1] == "guard_restored"
        assert [g.persistence_mode for g in machine.gpus] == [0, 1, 0, 0]
        await asyncio.to_thread(service.close)


async def test_persistence_under_clocks_set_elsewhere_is_left_on_and_said(tmp_path: Path,
                                                                          machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await engaged(tmp_path, ENFORCE, events, clock)
        # The operator's own clocks on GPU 2 (nvidia-smi -pm 1 -ac 877,1100): they need persistence mode.
        gpu = machine.gpus[2]
        gpu.app_clock_graphics_mhz, gpu.app_clocks_set = 1102, True
        await restore(service, clock)
        kind, message, _ = events.items[-1]
        assert kind == "guard_restored" and "gpu2 persistence mode on" in message
        assert [g.persistence_mode for g in machine.gpus] == [0, 0, 1, 0]
        assert gpu.app_clock_graphics_mhz == 1102
        await asyncio.to_thread(service.close)
