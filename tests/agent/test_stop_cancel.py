"""Loops stopped by cancelling them end when the cancel comes as they are woken.

Python 3.11's ``asyncio.wait_for`` swallows a cancel that arrives as the awaited event is set: the alarm
state's save loop, cancelled at the agent's stop while an alarm changed, ran on and the stop never ended
(a simulated rig's agent hung in a test run this way)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from rigmon.cluster.alarm_requests import AlarmRequests
from tests.agent.test_alarm_state import Emitted, keeper


async def cancelled_as_woken(task: asyncio.Task[object], wake: asyncio.Event) -> None:
    """Set ``wake`` and cancel ``task`` in the same turn of the loop; the task must end cancelled."""
    for _ in range(3):
        await asyncio.sleep(0)
    wake.set()
    await asyncio.sleep(0)  # the waiter inside the loop is woken ...
    task.cancel()           # ... and the stop's cancel comes before it runs
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(5):
            await task


async def test_the_alarm_state_save_loop_ends_when_cancelled_as_an_alarm_changes(tmp_path: Path) -> None:
    keep = keeper(tmp_path / "alarm-state.json", Emitted())
    task = asyncio.create_task(keep.run(interval_s=30.0, min_gap_s=0.0))
    await asyncio.sleep(0)
    assert keep._changed is not None
    await cancelled_as_woken(task, keep._changed)


async def test_the_dashboards_alarm_watch_ends_when_cancelled_as_it_is_woken(monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_alarms(self: AlarmRequests) -> object:
        return None

    monkeypatch.setattr(AlarmRequests, "alarms", no_alarms)
    requests = AlarmRequests.__new__(AlarmRequests)
    requests.backoff = SimpleNamespace(reset=lambda: None)  # type: ignore[assignment]
    wake = asyncio.Event()

    async def watch() -> None:
        async for _ in requests.watch_alarms(wake, 30.0):
            pass

    task = asyncio.create_task(watch())
    await cancelled_as_woken(task, wake)
