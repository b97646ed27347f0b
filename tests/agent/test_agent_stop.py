"""`Agent.stop` runs to its end when its caller cancels it (a second Ctrl-C, a timeout around the stop):
the journal closed, the alarm state saved, the state directory's lock released; then the cancellation
is passed on. The sampler task's own cancellation is no cancellation of the stop. A journal writer left
in a stuck disk write keeps the state directory locked until it ends."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from rigmon.agent.alarm_state import read_state_file, state_file_path
from rigmon.agent.journal import JournalReader, JournalStore
from rigmon.agent.journal import writer as writer_module
from rigmon.agent.state_lock import StateDirInUse, StateLock
from rigmon.schema import Event, Frame
from tests.agent.test_alarm_state import make_agent, settle
from tests.agent.test_alarms import wait_for
from tests.alarms.helpers import T0, FakeClock


@pytest.mark.parametrize("cancels", [1, 2])
async def test_a_cancelled_stop_still_closes_the_journal_saves_the_state_and_releases_the_lock(
        tmp_path: Path, cancels: int) -> None:
    clock = FakeClock(T0)
    agent, probe = make_agent(tmp_path, clock)
    agent.start()
    await wait_for(lambda: probe.push is not None)
    await settle(agent, clock, 1.0, probe, probe=95.0)  # the "hot" alarm fires: saved at the stop
    stopping = asyncio.create_task(agent.stop())
    for _ in range(cancels):
        await asyncio.sleep(0)  # the stop has begun (it waits for the sampler)
        stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    with JournalReader(tmp_path) as reader:
        assert [run.clean for run in reader.runs()] == [True]  # closed: the clean stop recorded
    state = read_state_file(state_file_path(tmp_path))
    assert state is not None and [carried.alarm.rule for carried in state.engine.alarms] == ["hot"]
    lock = StateLock(tmp_path)  # released: another agent may take the directory
    assert lock.held
    lock.release()


async def test_the_sampler_tasks_own_cancellation_does_not_cancel_the_stop(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    agent, probe = make_agent(tmp_path, clock)
    task = agent.start()
    await wait_for(lambda: probe.push is not None)
    await settle(agent, clock, 1.0, probe, probe=50.0)
    task.cancel()  # by its owner
    await agent.stop()  # returns: the sampler's end was expected
    with JournalReader(tmp_path) as reader:
        assert [run.clean for run in reader.runs()] == [True]


class StuckWriteStore(JournalStore):
    """A journal whose writes, once ``armed``, block (a disk stuck in the kernel) until ``returns``."""

    armed: threading.Event
    stalled: threading.Event
    returns: threading.Event

    def write(self, frames: Sequence[Frame], events: Sequence[tuple[str, Event]] = ()) -> None:
        cls = type(self)
        if cls.armed.is_set():
            cls.stalled.set()
            cls.returns.wait(30)
        super().write(frames, events)


async def test_a_journal_writer_left_in_a_stuck_write_keeps_the_state_directory_locked_until_it_ends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "CLOSE_TIMEOUT_S", 0.05)
    monkeypatch.setattr(writer_module, "ABANDON_WAIT_S", 0.05)
    monkeypatch.setattr(writer_module, "JournalStore", StuckWriteStore)
    for name in ("armed", "stalled", "returns"):
        monkeypatch.setattr(StuckWriteStore, name, threading.Event(), raising=False)
    clock = FakeClock(T0)
    agent, probe = make_agent(tmp_path, clock)
    agent.start()
    await wait_for(lambda: probe.push is not None)
    await settle(agent, clock, 1.0, probe, probe=50.0)
    StuckWriteStore.armed.set()
    await settle(agent, clock, 2.0, probe, probe=50.0)
    await wait_for(StuckWriteStore.stalled.is_set)
    assert agent.journal is not None
    writer = agent.journal._thread
    assert writer is not None
    try:
        await agent.stop()  # returns without the writer
        assert writer.is_alive()
        with pytest.raises(StateDirInUse):
            StateLock(tmp_path)  # another agent must not take the directory the writer may still write in
        # Started again meanwhile, the agent is refused, and not told to stop "another agent" (itself).
        with pytest.raises(StateDirInUse, match="still locked by this process .* stuck disk write"):
            agent.start()
    finally:
        StuckWriteStore.returns.set()
    writer.join(10)
    assert not writer.is_alive()
    lock = StateLock(tmp_path)  # released by the writer's end
    assert lock.held
    lock.release()
