"""The guard's state file: written before the first write reaches a GPU, found by the next agent run
(enforcing, dry-run or disabled), kept aside when unreadable."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rigmon.agent.guard.state_file import state_file_path
from rigmon.config import GuardSection
from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.agent.guard_helpers import ENFORCE, Clock, Events, engaged, frame, settle, started


async def engaged_then_killed(tmp_path: Path, events: Events, clock: Clock) -> None:
    """An enforcing guard that engages on a sag and is then killed: no close(), nothing restored;
    only its worker thread goes away (the state file and the caps stay)."""
    first = await engaged(tmp_path, ENFORCE, events, clock)
    first.worker._executor.shutdown(wait=True)


async def test_killed_while_engaged_then_restarted_finds_and_restores(tmp_path: Path,
                                                                      machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        await engaged_then_killed(tmp_path, events, clock)
        assert machine.gpus[2].app_clock_graphics_mhz == 1005
        assert state_file_path(tmp_path / "state").exists()

        events2 = Events()
        clock.t += 100
        second = await started(tmp_path, ENFORCE, events2, clock)
        kind, message, data = events2.items[0]
        assert kind == "guard_engaged" and data["left_behind"] is True and "previous agent run" in message
        reading = second.reading()
        assert reading.left_behind and reading.state == "engaged"
        assert [s.app_clock_graphics_mhz for s in reading.original] == [1312] * 4
        second.on_frame(frame(clock.t, 11.9))  # the rail read from the start: healthy for 31 s
        clock.t += 31
        second.on_frame(frame(clock.t, 11.9))
        await settle(second)
        assert events2.kinds()[-1] == "guard_restored"
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        assert not state_file_path(tmp_path / "state").exists() and not second.reading().left_behind
        await asyncio.to_thread(second.close)


def test_a_disabled_guard_still_reports_settings_left_behind(tmp_path: Path) -> None:
    from rigmon.agent.guard.state_file import report_left_behind_when_disabled

    events = Events()
    assert not report_left_behind_when_disabled(str(tmp_path), events)
    state_file_path(tmp_path).write_text("{}")
    assert report_left_behind_when_disabled(str(tmp_path), events)
    kind, message, data = events.items[0]
    assert kind == "guard_failed" and data["left_behind"] is True and "nvidia-smi -rac" in message


async def test_the_state_file_is_written_before_the_first_write_reaches_a_gpu(tmp_path: Path,
                                                                              machine: FakeNvmlMachine) -> None:
    # An agent killed while its first write is in the driver must still find the originals.
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, call_timeout_s=60.0, gpus=(0, 1))
    path = state_file_path(tmp_path / "state")
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, config, events, clock)
        machine.fail("hang", symbols={"nvmlDeviceSetApplicationsClocks"})
        try:
            service.on_frame(frame(clock.t, 11.3))
            for _ in range(500):
                if path.exists():
                    break
                await asyncio.sleep(0.01)
            assert path.exists(), "GPU 0 is being written and no state file says what to restore"
            saved = json.loads(path.read_text())
            assert [o["app_clock_graphics_mhz"] for o in saved["original"]] == [1312]
            assert [o["app_clock_graphics_mhz"] for o in saved["in_force"]] == [1005]
        finally:
            machine.heal("hang")
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus[:2]] == [1005] * 2
        await asyncio.to_thread(service.close)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4 and not path.exists()


@pytest.mark.parametrize("text", ["{not json", "[]", '{"step": 1, "gpus": [0], "original": [{"index": "zero"}]}'])
async def test_an_unreadable_state_file_is_kept_aside_and_not_overwritten(tmp_path: Path, machine: FakeNvmlMachine,
                                                                        text: str) -> None:
    events, clock = Events(), Clock()
    path = state_file_path(tmp_path / "state")
    path.parent.mkdir()
    path.write_text(text)
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, ENFORCE, events, clock)
        kind, message, data = events.items[0]
        assert kind == "guard_failed" and "unreadable" in message and "nvidia-smi -rac" in message
        assert service.reading().state == "armed"
        service.on_frame(frame(clock.t, 11.3))  # engages: writes a state file of its own
        await settle(service)
        assert path.with_name(path.name + ".unreadable").read_text() == text
        await asyncio.to_thread(service.close)


async def test_settings_left_behind_found_in_dry_run_are_not_promised_a_restore(tmp_path: Path,
                                                                                machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        await engaged_then_killed(tmp_path, events, clock)

        events2 = Events()
        second = await started(tmp_path, GuardSection(enabled=True, mode="dry-run", rail_count=1, restore_after_s=30.0),
                               events2, clock)
        kind, message, data = events2.items[0]
        assert kind == "guard_engaged" and data["left_behind"] is True
        assert "does not restore them" in message and "restored after" not in message
        second.on_frame(frame(clock.t, 11.9))  # the rail read from the start: healthy for 31 s
        clock.t += 31
        second.on_frame(frame(clock.t, 11.9))
        await settle(second)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4  # dry-run writes nothing
        assert state_file_path(tmp_path / "state").exists()
        await asyncio.to_thread(second.close)


async def test_settings_left_behind_in_dry_run_stay_on_the_dashboard_after_its_would_restore(
        tmp_path: Path, machine: FakeNvmlMachine) -> None:
    """The dry-run guard's "would restore" changes nothing: the caps are still in force and the
    dashboard must keep saying so (it showed a plain armed guard and no mark)."""
    from rigmon.summary.figures import guard_mark
    from rigmon.tui.widgets.guard_line import guard_text

    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        await engaged_then_killed(tmp_path, events, clock)
        second = await started(tmp_path, GuardSection(enabled=True, mode="dry-run", rail_count=1, restore_after_s=30.0),
                               Events(), clock)
        second.on_frame(frame(clock.t, 11.9))  # the rail read from the start: healthy for 31 s
        clock.t += 31
        second.on_frame(frame(clock.t, 11.9))
        await settle(second)
        reading = second.reading()
        assert [s.app_clock_graphics_mhz for s in reading.settings] == [1005] * 4
        assert guard_mark(reading) == "G!"
        assert "caps a previous agent run left still in force on GPUs 0,1,2,3" in guard_text(reading)
        assert "reset them by hand" in guard_text(reading)
        await asyncio.to_thread(second.close)


def test_a_save_never_makes_the_directories_above_the_state_directory(tmp_path: Path) -> None:
    # Before: a save after the state directory and its parent were removed made them all again.
    from rigmon.agent.guard.state_file import SavedSettings, write_state

    path = state_file_path(tmp_path / "gone" / "state")
    saved = SavedSettings(step=1, gpus=(0,), original=(), in_force=(), original_persistence={})
    with pytest.raises(FileNotFoundError):
        write_state(path, saved)
    assert not (tmp_path / "gone").exists()
    (tmp_path / "gone").mkdir()
    write_state(path, saved)  # the state directory itself is made when its parent is there
    assert path.exists()


async def test_an_operators_hold_outlives_a_killed_agent(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    # Held ("keep the caps until I release them"), then the agent is killed (OOM, a crash; systemd starts it
    # again): the next run took the caps for left behind by an engaged guard and restored them once the rail
    # read healthy, uncapping the GPUs on a rail the operator had chosen to keep capped.
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        first = await engaged(tmp_path, ENFORCE, events, clock)
        first.command("hold", "alice")
        await settle(first)
        first.worker._executor.shutdown(wait=True)
        assert json.loads(state_file_path(tmp_path / "state").read_text())["held"] is True

        events2 = Events()
        clock.t += 100
        second = await started(tmp_path, ENFORCE, events2, clock)
        kind, message, data = events2.items[0]
        assert kind == "guard_engaged" and data["left_behind"] is True and data["held"] is True
        assert "held by the operator: they stay until released" in message
        assert second.reading().state == "held" and second.reading().left_behind
        second.on_frame(frame(clock.t, 11.9))
        clock.t += 400  # healthy far longer than restore_after_s
        second.on_frame(frame(clock.t, 11.9))
        await settle(second)
        assert "guard_restored" not in events2.kinds()
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4
        second.command("release", "alice")
        await settle(second)
        assert events2.kinds()[-1] == "guard_restored"
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        await asyncio.to_thread(second.close)
