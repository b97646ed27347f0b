"""What the guard remembers across an agent restart though nothing is in force (``guard-memory.json``): an
operator's release (a restart does not re-engage a released guard) and the hour's actions (a restart does not
reset ``max_actions_per_hour``)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from rigmon.agent.guard.memory_file import memory_file_path
from rigmon.config import GuardSection
from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.agent.guard_helpers import ENFORCE, Clock, Events, engaged, engaged_by_sags, frame, settle, started


@pytest.mark.parametrize("killed", [False, True])
async def test_a_released_guard_stays_released_over_a_restart(tmp_path: Path, machine: FakeNvmlMachine,
                                                              killed: bool) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        first = await engaged(tmp_path, ENFORCE, events, clock)
        first.command("release", "alice")
        await settle(first)
        until = first.reading().released_until
        assert until == clock.t + 30 and machine.gpus[0].app_clock_graphics_mhz == 1312
        if killed:
            first.worker._executor.shutdown(wait=True)  # no close(): a kill -9
        else:
            await asyncio.to_thread(first.close)

        clock.t += 10
        events2 = Events()
        second = await started(tmp_path, ENFORCE, events2, clock)
        reading = second.reading()
        assert (reading.state, reading.released_until) == ("released", until)
        second.on_frame(frame(clock.t, 11.3))  # the rail sags within the operator's release: no engage
        await settle(second)
        assert "guard_engaged" not in events2.kinds() and machine.gpus[0].app_clock_graphics_mhz == 1312
        clock.t += 21  # the release is over: armed again
        assert second.reading().state == "armed"
        second.on_frame(frame(clock.t, 11.3))
        await settle(second)
        assert events2.kinds()[-1] == "guard_engaged" and machine.gpus[0].app_clock_graphics_mhz == 1005
        await asyncio.to_thread(second.close)


async def test_a_restart_does_not_reset_the_hourly_ceiling(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, restore_after_s=30.0, step_after_s=0.0,
                          max_actions_per_hour=2, gpus=(0, 1, 2, 3))
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        first = await engaged_by_sags(tmp_path, config, events, clock, sags=2)  # engage and step: the ceiling
        assert events.kinds() == ["guard_engaged", "guard_step"]
        await asyncio.to_thread(first.close)  # a stop restores: a third action this hour
        assert events.kinds()[-1] == "guard_restored"

        clock.t += 60
        events2 = Events()
        second = await started(tmp_path, config, events2, clock)
        assert second.reading().actions_last_hour == 3
        second.on_frame(frame(clock.t, 11.3))
        await settle(second)
        assert events2.kinds() == ["guard_failed"] and "ceiling of 2 actions per hour" in events2.items[0][1]
        assert machine.gpus[0].app_clock_graphics_mhz == 1312
        # An hour after the first run's actions the ceiling is free again.
        clock.t += 3600
        second.on_frame(frame(clock.t, 11.3))
        await settle(second)
        assert events2.kinds()[-1] == "guard_engaged"
        await asyncio.to_thread(second.close)


async def test_an_unreadable_memory_is_forgotten_with_a_warning(tmp_path: Path, machine: FakeNvmlMachine,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    path = memory_file_path(tmp_path / "state")
    path.parent.mkdir()
    path.write_text('{"released_until": "soon"}')
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine), caplog.at_level(logging.WARNING):
        service = await started(tmp_path, ENFORCE, events, clock)
        assert service.reading().state == "armed"
        assert "cannot read" in caplog.text and "guard-memory.json" in caplog.text
        service.on_frame(frame(clock.t, 11.3))
        await settle(service)
        assert events.kinds() == ["guard_engaged"]
        await asyncio.to_thread(service.close)


async def test_a_release_set_far_ahead_by_a_clock_set_back_is_cut_to_the_quiet_time(
        tmp_path: Path, machine: FakeNvmlMachine) -> None:
    path = memory_file_path(tmp_path / "state")
    path.parent.mkdir()
    clock = Clock()
    path.write_text(f'{{"released_until": {clock.t + 86400}}}')
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, ENFORCE, Events(), clock)
        assert service.reading().released_until == clock.t + ENFORCE.restore_after_s
        await asyncio.to_thread(service.close)
