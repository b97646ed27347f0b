"""The guard's restores that do not go to plan: a hung driver, a GPU lost while capped, a sag during
the stop, settings another tool changed, a retry under a firing trigger alarm."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from rigmon.agent.guard.service import GuardService
from rigmon.agent.guard.state_file import state_file_path
from rigmon.config import GuardSection
from rigmon.hw.nvml_control import NvmlControl
from rigmon.schema import Alarm, CollectorStatus
from rigmon.sim.nvml import FakeNvmlMachine, serving
from rigmon.summary.figures import guard_mark
from rigmon.tui.widgets.guard_line import guard_text
from tests.agent.guard_helpers import (
    DEADLINE_S,
    ENFORCE,
    RULE,
    Clock,
    Events,
    alarm_event,
    engaged,
    firing_alarm,
    frame,
    gpu_frame,
    make,
    settle,
)


async def driver_answers(service: GuardService) -> None:
    """Wait until the call that hung has returned (its watchdog fails every call until then)."""
    control = service.shared.control
    assert isinstance(control, NvmlControl)
    for _ in range(int(DEADLINE_S / 0.01)):
        if not control._watchdog.stuck:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the hung call never returned")


async def restore_hangs_once(service: GuardService, machine: FakeNvmlMachine, clock: Clock) -> None:
    """The restore due after a healthy frame 31 s on hangs in the driver's first write (every GPU's
    restore fails); returns once the driver answers again."""
    machine.fail("hang", symbols={"nvmlDeviceSetApplicationsClocks"})
    clock.t += 31
    service.on_frame(frame(clock.t, 11.9, gpus=4))
    await settle(service)
    machine.heal("hang")
    await driver_answers(service)


async def test_a_restore_that_hung_is_tried_again_and_a_stop_still_restores(tmp_path: Path,
                                                                           machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, restore_after_s=30.0, call_timeout_s=0.2,
                          gpus=(0, 1, 2, 3))
    with serving(tmp_path / "root", machine):
        service = await engaged(tmp_path, config, events, clock, gpus=4)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4
        # The driver hangs on the restore's first write: every GPU's restore fails.
        await restore_hangs_once(service, machine, clock)
        assert events.kinds()[-1] == "guard_failed"
        assert state_file_path(tmp_path / "state").exists()
        assert len(service.reading().settings) == 4  # still in force, and said so
        # ... on the dashboard too: not "guard armed" and no mark while the caps are on.
        assert service.reading().step == 0 and guard_mark(service.reading()) == "G!"
        assert "caps still in force on GPUs 0,1,2,3, the restore failed: retrying" in guard_text(service.reading())
        # The guard tries again once the driver answers; GPU 3 fell off the bus meanwhile.
        machine.fail("gpu_lost", gpu=3)
        for _ in range(3):
            clock.t += 30
            service.on_frame(frame(clock.t, 11.9, gpus=4, lost=(3,)))
            await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus[:3]] == [1312] * 3
        kind, message, data = events.items[-1]
        assert kind == "guard_restored" and "GPUs 0,1,2 " in message
        assert [s.index for s in service.reading().settings] == [3]  # the lost one, still reported
        # Not retried while off the bus, and the line says so rather than "retrying".
        assert service.reading().off_bus == (3,)
        assert "GPUs 3 off the bus: not retried until back" in guard_text(service.reading())
        assert state_file_path(tmp_path / "state").exists()
        await asyncio.to_thread(service.close)


async def test_a_stop_after_a_failed_restore_puts_the_settings_back(tmp_path: Path,
                                                                   machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, restore_after_s=30.0, call_timeout_s=0.2,
                          gpus=(0, 1))
    with serving(tmp_path / "root", machine):
        service = await engaged(tmp_path, config, events, clock, gpus=4)
        await restore_hangs_once(service, machine, clock)
        assert machine.gpus[1].app_clock_graphics_mhz == 1005
        await asyncio.to_thread(service.close)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        assert not state_file_path(tmp_path / "state").exists()


async def test_settings_another_tool_changed_while_engaged_show_in_readings(tmp_path: Path,
                                                                           machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = make(tmp_path, ENFORCE, events, clock)
        service.start()
        before = gpu_frame(clock.t, machine)  # taken before the guard's write
        service.on_frame(frame(clock.t, 11.3))
        await settle(service)
        service.on_frame(before)  # older than the write: shows the old clocks, changes nothing
        machine.gpus[0].power_limit_mw = 150_000
        hung = msgspec.structs.replace(gpu_frame(clock.t + 5, machine), collectors={
            "gpu": CollectorStatus("hung", False, sampled_at=clock.t + 5)})
        machine.gpus[0].power_limit_mw = 300_000
        service.on_frame(hung)  # a hung collector's readings: not taken up either
        settings = service.reading().settings
        assert [(s.app_clock_graphics_mhz, s.power_limit_w) for s in settings] == [(1005, 300.0)] * 4
        machine.gpus[2].app_clock_graphics_mhz = 1312  # nvidia-smi -rac by a job's prologue
        clock.t += 1
        service.on_frame(gpu_frame(clock.t, machine))
        await settle(service)
        assert [s.app_clock_graphics_mhz for s in service.reading().settings] == [1005, 1005, 1312, 1005]
        kind, message, data = events.items[-1]
        assert kind == "guard_failed" and data["changed_elsewhere"] is True and "gpu2 877/1312 MHz" in message
        clock.t += 1
        service.on_frame(gpu_frame(clock.t, machine))  # said once
        await settle(service)
        assert events.items[-1][1] == message and len(events.items) == 2
        clock.t += 31
        service.on_frame(gpu_frame(clock.t, machine))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        assert events.kinds()[-1] == "guard_restored"
        await asyncio.to_thread(service.close)


async def test_a_gpu_lost_while_capped_does_not_keep_the_others_capped(tmp_path: Path,
                                                                      machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await engaged(tmp_path, ENFORCE, events, clock, gpus=4)
        machine.fail("gpu_lost", gpu=3)
        clock.t += 31
        service.on_frame(frame(clock.t, 11.9, gpus=4, lost=(3,)))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus[:3]] == [1312] * 3
        kind, message, _ = events.items[-1]
        assert kind == "guard_failed" and message.startswith("guard: restored GPUs 0,1,2; restoring: GPU 3: ")
        assert "GPU 3: GPU 3" not in message and "lost" in message
        assert [s.index for s in service.reading().original] == [3]
        for _ in range(3):  # not tried again while it is off the bus
            clock.t += 61
            service.on_frame(frame(clock.t, 11.9, gpus=4, lost=(3,)))
            await settle(service)
        assert events.kinds().count("guard_failed") == 1
        await asyncio.to_thread(service.close)


async def test_a_sag_while_the_stopping_agent_restores_does_not_cap_again(tmp_path: Path,
                                                                         machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, call_timeout_s=30.0, gpus=(0, 1, 2, 3))
    with serving(tmp_path / "root", machine):
        service = await engaged(tmp_path, config, events, clock, gpus=4)
        machine.fail("hang", symbols={"nvmlDeviceSetApplicationsClocks"})
        stopping = asyncio.create_task(asyncio.to_thread(service.close))
        for _ in range(int(DEADLINE_S / 0.01)):  # the stop began; its restore hangs in the driver
            if service.shared.closing:
                break
            await asyncio.sleep(0.01)
        clock.t += 1
        service.on_frame(frame(clock.t, 11.2, gpus=4))  # frames still flow during the stop
        assert service.reading().state == "armed"
        machine.heal("hang")
        await stopping
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        assert not state_file_path(tmp_path / "state").exists()


async def test_a_retry_does_not_restore_while_a_trigger_alarm_fires(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    """The restore hangs; then the rail alarm starts firing, but the ceiling on actions stops a new engage.
    The retry a minute later put the caps back under the firing alarm; it waits as the first restore does:
    until the alarm resolved ``restore_after_s`` ago."""
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, restore_after_s=30.0, call_timeout_s=0.2,
                          gpus=(0, 1, 2, 3), alarm_rules=(RULE,), max_actions_per_hour=1)
    active: list[Alarm] = []
    with serving(tmp_path / "root", machine):
        service = await engaged(tmp_path, config, events, clock, gpus=4)
        service.active_alarms = lambda: active
        await restore_hangs_once(service, machine, clock)
        # The hung write landed on GPU 0 once the driver answered; the others are still capped.
        assert events.kinds()[-1] == "guard_failed" and [g.app_clock_graphics_mhz for g in machine.gpus[1:]] == [1005] * 3
        active.append(firing_alarm())
        clock.t += 1
        service.on_frame(msgspec.structs.replace(frame(clock.t, 11.9, gpus=4), events=(alarm_event("alarm_firing"),)))
        await settle(service)
        assert "ceiling of 1 actions per hour reached" in events.items[-1][1]
        for _ in range(6):  # three minutes under the firing alarm, the rail read healthy
            clock.t += 30
            service.on_frame(frame(clock.t, 11.9, gpus=4))
            await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus[1:]] == [1005] * 3
        assert "guard_restored" not in events.kinds()
        active.clear()  # resolved: the retry waits restore_after_s more
        clock.t += 30
        service.on_frame(msgspec.structs.replace(frame(clock.t, 11.9, gpus=4), events=(alarm_event("alarm_resolved"),)))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus[1:]] == [1005] * 3
        clock.t += 30
        service.on_frame(frame(clock.t, 11.9, gpus=4))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        assert events.kinds()[-1] == "guard_restored" and "retrying the restore" in events.items[-1][1]
        await asyncio.to_thread(service.close)
