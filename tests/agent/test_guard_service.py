"""The guard in the agent over the fake NVML: acting, dry-run, refusals, hung calls, stop and hold."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rigmon.agent.guard.state_file import state_file_path
from rigmon.config import GuardSection
from rigmon.sim.nvml import FakeNvmlMachine, serving, v100_sxm2_gpus
from tests.agent.guard_helpers import ENFORCE, Clock, Events, engaged, engaged_by_sags, frame, settle, started


async def test_enforce_caps_every_gpu_then_restores_after_healthy(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await engaged(tmp_path, ENFORCE, events, clock)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4  # derived: 0.66 x 1530
        assert all(g.persistence_mode == 1 for g in machine.gpus)
        kind, message, data = events.items[-1]
        assert kind == "guard_engaged" and data["dry_run"] is False and data["gpus"] == "0,1,2,3"
        assert "877/1312 MHz" in str(data["before"]) and "877/1005 MHz" in str(data["after"])
        assert "11.300 V" in str(data["trigger"])
        assert state_file_path(tmp_path / "state").exists()
        reading = service.reading()
        assert (reading.state, reading.step, reading.acting) == ("engaged", 1, True)
        clock.t += 31
        service.on_frame(frame(clock.t, 11.9))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        assert not any(g.app_clocks_set for g in machine.gpus)
        assert all(g.persistence_mode == 0 for g in machine.gpus)
        assert events.kinds()[-1] == "guard_restored" and not state_file_path(tmp_path / "state").exists()
        assert service.reading().state == "armed"
        await asyncio.to_thread(service.close)


async def test_a_hung_call_is_reported_and_sampling_is_not_blocked(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, call_timeout_s=0.2, app_clocks_mhz=(877, 1005),
                          gpus=(0, 1))
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, config, events, clock)
        machine.fail("hang")
        try:
            # Frames keep coming while the driver hangs: on_frame only decides and queues.
            service.on_frame(frame(clock.t, 11.3))
            for _ in range(5):
                clock.t += 1
                service.on_frame(frame(clock.t, 11.9))
            await settle(service)
            failed = [(m, d) for k, m, d in events.items if k == "guard_failed"]
            assert failed and ("did not return" in failed[0][0] or "has not returned" in failed[0][0])
            assert service.reading().failures_total >= 1
        finally:
            machine.heal("hang")
        await asyncio.to_thread(service.close)


async def test_stop_restores_what_it_changed(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, step_after_s=0, power_limit_w=200,
                          gpus=(0, 1, 2, 3))
    with serving(tmp_path / "root", machine):
        service = await engaged_by_sags(tmp_path, config, events, clock, sags=3)
        assert events.kinds()[-3:] == ["guard_engaged", "guard_step", "guard_step"]
        assert machine.gpus[0].locked_clock_max_mhz == 1005 and machine.gpus[0].power_limit_mw == 200_000
        await asyncio.to_thread(service.close)
        await asyncio.sleep(0)
        assert events.kinds()[-1] == "guard_restored"
        gpu = machine.gpus[0]
        assert (gpu.app_clock_graphics_mhz, gpu.locked_clock_max_mhz, gpu.power_limit_mw) == (1312, None, 300_000)
        assert not state_file_path(tmp_path / "state").exists()


async def test_a_power_limit_whose_value_before_was_not_known_goes_back_to_the_default(tmp_path: Path) -> None:
    """A driver that does not report the power limit: the guard's 200 W stayed after the restore."""
    machine = FakeNvmlMachine(v100_sxm2_gpus(4), missing_symbols=["nvmlDeviceGetPowerManagementLimit"])
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, step_after_s=0, power_limit_w=200,
                          restore_after_s=30.0, gpus=(0, 1, 2, 3))
    with serving(tmp_path / "root", machine):
        service = await engaged_by_sags(tmp_path, config, events, clock, sags=3)
        assert [g.power_limit_mw for g in machine.gpus] == [200_000] * 4
        assert [s.power_limit_w for s in service.reading().settings] == [200.0] * 4
        clock.t += 31
        service.on_frame(frame(clock.t, 11.9))
        await settle(service)
        assert events.kinds()[-1] == "guard_restored"
        assert [g.power_limit_mw for g in machine.gpus] == [g.default_limit_mw for g in machine.gpus]
        await asyncio.to_thread(service.close)


async def test_operator_hold_and_release(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await engaged(tmp_path, ENFORCE, events, clock)
        assert service.command("hold", "alice").state == "held"
        clock.t += 1000
        service.on_frame(frame(clock.t, 11.9))
        await settle(service)
        assert machine.gpus[0].app_clock_graphics_mhz == 1005
        service.command("release", "alice")
        await settle(service)
        assert machine.gpus[0].app_clock_graphics_mhz == 1312
        assert events.kinds()[-1] == "guard_restored" and "alice" in events.items[-1][1]
        await asyncio.to_thread(service.close)


async def test_writes_that_were_all_refused_leave_no_state_file(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, app_clocks_mhz=(877, 1000), gpus=(0, 1))
    with serving(tmp_path / "root", machine):
        service = await engaged(tmp_path, config, events, clock)  # 1000 MHz is no V100 clock: INVALID_ARGUMENT
        assert events.kinds()[-1] == "guard_failed"
        assert not state_file_path(tmp_path / "state").exists()
        assert service.reading().settings == ()
        await asyncio.to_thread(service.close)


async def test_settings_the_gpus_refuse_are_reported_at_start(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", app_clocks_mhz=(1005, 877), power_limit_w=100.0,
                          gpus=(0, 5))
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, config, events, clock)
        [(kind, message, _)] = events.items
        assert kind == "guard_failed" and "does not fit" in message
        assert "gpus: 5 not on this node" in message and "[1005, 877]" in message and "100" in message
        events.items.clear()
        good = await started(tmp_path, ENFORCE, events, clock)
        assert events.items == []
        await asyncio.to_thread(good.close)
        await asyncio.to_thread(service.close)


async def test_a_throttle_trigger_for_more_gpus_than_the_node_has_is_reported_at_start(
        tmp_path: Path, machine: FakeNvmlMachine) -> None:
    # throttle_gpus = 8 in a [guard] shared with 8-GPU nodes, on this 4-GPU one: the trigger could never fire,
    # and nothing said so; the operator counted on it.
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", throttle_gpus=len(machine.gpus) + 4)
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, config, events, clock)
        [(kind, message, _)] = events.items
        assert kind == "guard_failed" and "does not fit" in message
        assert f"throttle_gpus {len(machine.gpus) + 4}: this node has {len(machine.gpus)} GPUs" in message
        await asyncio.to_thread(service.close)


async def test_a_driver_loaded_after_the_agent_started_lets_the_guard_act(tmp_path: Path,
                                                                         machine: FakeNvmlMachine) -> None:
    # At boot the agent may start before the nvidia module is loaded: not a reason to stay in dry-run.
    events, clock = Events(), Clock()
    machine.fail("driver_missing")
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, ENFORCE, events, clock)
        assert not service.reading().acting and "no NVIDIA driver" in str(service.reading().reason)
        machine.heal("driver_missing")
        clock.t += 61
        service.on_frame(frame(clock.t, 11.3, gpus=4))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4
        assert service.reading().acting and events.kinds()[-1] == "guard_engaged"
        await asyncio.to_thread(service.close)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
