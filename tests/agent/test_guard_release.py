"""The operator's release of the undervolt guard: a restore only when settings were in force, a
``guard_released_idle`` event when nothing was (a webhook or a reader counting ``guard_restored``
counts restores), and the dashboard's line says which it was."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from rigmon.config import GuardSection
from rigmon.sim.nvml import FakeNvmlMachine, serving
from rigmon.tui.operations import guard_command_done
from tests.agent.guard_helpers import ENFORCE, Clock, Events, engaged, settle, started
from tests.agent.test_guard_restore import restore_hangs_once


async def test_a_release_with_nothing_in_force_is_not_a_restore(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, ENFORCE, events, clock)
        answer = service.command("release", "alice")
        await settle(service)
        assert events.kinds() == ["guard_released_idle"]
        _, message, data = events.items[-1]
        assert message == "guard released by alice: nothing was in force; it does not engage for 30 s"
        assert data == {"by": "alice", "command": "release", "step": 0}
        assert guard_command_done("release", answer) == "released: nothing was in force (now released, step 0)"
        await asyncio.to_thread(service.close)
    assert "guard_restored" not in events.kinds()  # nothing to put back at the stop either


async def test_a_release_of_caps_in_force_restores_them(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await engaged(tmp_path, ENFORCE, events, clock)
        answer = service.command("release", "alice")
        await settle(service)
        assert events.kinds() == ["guard_engaged", "guard_restored"]
        assert machine.gpus[0].app_clock_graphics_mhz == 1312
        # The answer is the state the release began from: the settings it is putting back.
        assert [s.index for s in answer.original] == [0, 1, 2, 3]
        assert guard_command_done("release", answer) == \
            "released: restoring the GPUs' settings (now released, step 0)"
        await asyncio.to_thread(service.close)


async def test_a_release_after_a_failed_restore_puts_the_settings_back_now(tmp_path: Path,
                                                                           machine: FakeNvmlMachine) -> None:
    """Armed again (step 0) with caps still in force: "nothing was in force" would be false."""
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, restore_after_s=30.0, call_timeout_s=0.2,
                          gpus=(0, 1, 2, 3))
    with serving(tmp_path / "root", machine):
        service = await engaged(tmp_path, config, events, clock, gpus=4)
        await restore_hangs_once(service, machine, clock)
        assert service.reading().step == 0 and events.kinds()[-1] == "guard_failed"
        answer = service.command("release", "alice")
        await settle(service)
        assert "guard_released_idle" not in events.kinds()
        kind, message, _ = events.items[-1]
        assert kind == "guard_restored" and "released by alice" in message
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        assert guard_command_done("release", answer).startswith("released: restoring the GPUs' settings")
        await asyncio.to_thread(service.close)


async def test_a_dry_run_release_says_it_would_restore(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    # Before: "released: restoring the GPUs' settings" from a guard that never changed them.
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await engaged(tmp_path, msgspec.structs.replace(ENFORCE, mode="dry-run"), events, clock)
        answer = service.command("release", "alice")
        await settle(service)
        assert answer.original and not answer.acting
        assert guard_command_done("release", answer) == \
            "released: would restore the GPUs' settings (not acting) (now released, step 0)"
        assert machine.gpus[0].app_clock_graphics_mhz == 1312  # never changed
        await asyncio.to_thread(service.close)
