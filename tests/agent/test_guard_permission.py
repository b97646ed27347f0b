"""The guard without the permissions it asks for: said once, never asked again; what it may write
(application clocks only) is still capped and restored."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rigmon.agent.guard.state_file import state_file_path
from rigmon.config import GuardSection
from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.agent.guard_helpers import ENFORCE, Clock, Events, engaged, engaged_by_sags, frame, settle, started


async def test_no_permission_reports_once_and_stays_in_dry_run(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    machine.no_permission = True
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, ENFORCE, events, clock)
        service.on_frame(frame(clock.t, 11.3))
        await settle(service)
        assert events.kinds() == ["guard_failed", "guard_engaged"]
        assert "permission" in events.items[0][1]
        _, message, data = events.items[1]
        assert data["dry_run"] is True and "would cap" in message and "877/1005 MHz" in str(data["after"])
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        reading = service.reading()
        assert not reading.acting and reading.reason and "permission" in reading.reason
        assert not state_file_path(tmp_path / "state").exists()
        await asyncio.to_thread(service.close)


async def test_application_clocks_only_permission_still_restores_what_it_capped(tmp_path: Path,
                                                                                 machine: FakeNvmlMachine) -> None:
    # nvidia-smi -pm 1; nvidia-smi -acp UNRESTRICTED; agent not root: step 1 may write, step 2 may not.
    machine.no_permission = machine.app_clocks_unrestricted = True
    for gpu in machine.gpus:
        gpu.persistence_mode = 1
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, step_after_s=0, restore_after_s=30.0,
                          gpus=(0, 1, 2, 3))
    with serving(tmp_path / "root", machine):
        service = await engaged_by_sags(tmp_path, config, events, clock, sags=2)
        assert [(g.app_clock_graphics_mhz, g.locked_clock_max_mhz) for g in machine.gpus] == [(1005, None)] * 4
        kind, message, _ = events.items[-1]
        assert kind == "guard_failed" and "lock clocks" in message and "permission" in message
        reading = service.reading()
        # What is in force, not what a dry-run would have added on top.
        assert [(s.app_clock_graphics_mhz, s.locked_clock_max_mhz) for s in reading.settings] == [(1005, None)] * 4
        assert "would cap" not in " ".join(m for _, m, _ in events.items)
        clock.t += 31
        service.on_frame(frame(clock.t, 11.9))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        kind, message, data = events.items[-1]
        assert kind == "guard_restored" and "would" not in message and data["dry_run"] is False
        assert not state_file_path(tmp_path / "state").exists()
        # The next sag is capped again: a refused lock does not make the whole guard a dry-run.
        clock.t += 1
        service.on_frame(frame(clock.t, 11.3))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4
        assert service.reading().acting
        await asyncio.to_thread(service.close)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4


async def test_application_clocks_only_permission_caps_without_persistence_and_a_stop_restores(
        tmp_path: Path, machine: FakeNvmlMachine) -> None:
    # Persistence mode needs root even under -acp UNRESTRICTED: the clocks are capped all the same.
    machine.no_permission = machine.app_clocks_unrestricted = True
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await engaged(tmp_path, ENFORCE, events, clock)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4
        assert events.kinds()[-1] == "guard_engaged" and service.reading().acting
        await asyncio.to_thread(service.close)
        assert [(g.app_clock_graphics_mhz, g.persistence_mode) for g in machine.gpus] == [(1312, 0)] * 4
        assert not state_file_path(tmp_path / "state").exists()


async def test_no_permission_is_not_asked_again(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    machine.no_permission = True
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, ENFORCE, events, clock)
        writes = machine.calls["nvmlDeviceSetApplicationsClocks"]
        for _ in range(3):
            clock.t += 61
            service.on_frame(frame(clock.t, 11.9, gpus=4))
            await settle(service)
        assert machine.calls["nvmlDeviceSetApplicationsClocks"] == writes
        await asyncio.to_thread(service.close)
