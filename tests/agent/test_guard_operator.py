"""The guard and what an operator set by hand while it was engaged (``nvidia-smi -pl``, ``-ac``):
a restore puts back only what the guard itself still has in force."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from rigmon.agent.guard.service import GuardService
from rigmon.agent.guard.state_file import state_file_path
from rigmon.config import GuardSection
from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.agent.guard_helpers import Clock, Events, engaged_by_sags, frame, make, settle
from tests.agent.test_guard_restore import gpu_frame

#: Application clocks, then a 200 W power limit at the next sag.
TWO_STEPS = GuardSection(enabled=True, mode="enforce", rail_count=1, restore_after_s=30.0, step_after_s=0.0,
                         locked_clocks=False, power_limit_w=200.0, gpus=(0, 1, 2, 3))


async def test_a_limit_set_by_hand_while_capped_is_not_overwritten_by_the_restore(tmp_path: Path,
                                                                                  machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await engaged_by_sags(tmp_path, TWO_STEPS, events, clock, sags=2)
        assert [g.power_limit_mw for g in machine.gpus] == [200_000] * 4
        machine.gpus[1].power_limit_mw = 250_000  # nvidia-smi -i 1 -pl 250, before any frame shows it
        machine.gpus[2].app_clock_graphics_mhz = 900  # nvidia-smi -i 2 -ac 877,900
        clock.t += 31
        service.on_frame(frame(clock.t, 11.9))
        await settle(service)
        assert [g.power_limit_mw for g in machine.gpus] == [300_000, 250_000, 300_000, 300_000]
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312, 1312, 900, 1312]
        kind, message, _ = events.items[-1]
        assert kind == "guard_restored" and "left as set elsewhere" in message and "gpu1 power limit 250 W" in message
        assert not state_file_path(tmp_path / "state").exists()
        await asyncio.to_thread(service.close)


async def test_a_limit_set_by_hand_that_a_frame_showed_is_kept_through_the_restore(tmp_path: Path,
                                                                                  machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await engaged_by_sags(tmp_path, TWO_STEPS, events, clock, sags=2)
        machine.gpus[3].power_limit_mw = 250_000
        clock.t += 1
        service.on_frame(gpu_frame(clock.t, machine))  # the frame shows the operator's limit
        await settle(service)
        assert events.kinds()[-1] == "guard_failed"
        assert "restoring leaves them" in events.items[-1][1]
        clock.t += 31
        service.on_frame(gpu_frame(clock.t, machine))
        await settle(service)
        assert [g.power_limit_mw for g in machine.gpus] == [300_000, 300_000, 300_000, 250_000]
        await asyncio.to_thread(service.close)


async def restarted_and_healthy(tmp_path: Path, events: Events, clock: Clock) -> GuardService:
    """The next start of an agent killed while capped, the rail read healthy from its start for 31 s
    (past ``restore_after_s``): its restore of the caps the killed run left has run."""
    service = make(tmp_path, TWO_STEPS, events, clock)
    service.start()
    await settle(service)
    service.on_frame(frame(clock.t, 11.9))
    clock.t += 31
    service.on_frame(frame(clock.t, 11.9))
    await settle(service)
    return service


async def test_a_limit_set_by_hand_while_the_agent_was_down_survives_the_next_start(
        tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        killed = await engaged_by_sags(tmp_path, TWO_STEPS, events, clock, sags=2)
        killed.worker.shutdown()  # killed: no restore, the state file stays
        machine.gpus[0].power_limit_mw = 180_000
        service = await restarted_and_healthy(tmp_path, events, clock)
        assert [g.power_limit_mw for g in machine.gpus] == [180_000, 300_000, 300_000, 300_000]
        assert not state_file_path(tmp_path / "state").exists()
        await asyncio.to_thread(service.close)


async def test_a_gpu_replaced_while_capped_does_not_get_the_old_ones_settings(tmp_path: Path,
                                                                             machine: FakeNvmlMachine) -> None:
    """Killed while capped, GPU 2 swapped for a 250 W board: the next start does not write the old
    board's 300 W on it (the driver refused that at every retry, the guard failing for ever)."""
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        killed = await engaged_by_sags(tmp_path, TWO_STEPS, events, clock, sags=2)
        killed.worker.shutdown()
        machine.gpus[2] = dataclasses.replace(machine.gpus[2], uuid="GPU-new", power_limit_mw=250_000,
                                              enforced_limit_mw=250_000, default_limit_mw=250_000,
                                              app_clock_graphics_mhz=1312)
        service = await restarted_and_healthy(tmp_path, events, clock)
        assert [g.power_limit_mw for g in machine.gpus] == [300_000, 300_000, 250_000, 300_000]
        assert events.kinds()[-1] == "guard_restored"
        assert not state_file_path(tmp_path / "state").exists()
        await asyncio.to_thread(service.close)


async def test_a_late_filed_frame_of_the_settings_before_the_cap_is_no_change_elsewhere(
        tmp_path: Path, machine: FakeNvmlMachine) -> None:
    """A GPU poll that ran before the guard's write but was filed after it (a busy scheduler) shows the
    old clocks: not a change by another tool (seen on undervolt-bus-drop-guarded), and never taken for
    what a restore puts back (the guard's own cap would stay for good)."""
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        stale = gpu_frame(clock.t + 2, machine)  # polled before the cap, filed a second after it
        service = await engaged_by_sags(tmp_path, TWO_STEPS, events, clock, sags=1)
        clock.t += 1
        service.on_frame(stale)
        await settle(service)
        clock.t += 1
        service.on_frame(gpu_frame(clock.t, machine))
        await settle(service)
        assert events.kinds() == ["guard_engaged"]
        assert [s.app_clock_graphics_mhz for s in service.reading().original] == [1312] * 4
        clock.t += 31
        service.on_frame(gpu_frame(clock.t, machine))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        assert events.kinds() == ["guard_engaged", "guard_restored"]
        await asyncio.to_thread(service.close)
