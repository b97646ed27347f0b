"""Tick scheduling on its own: a runner's report of a batch's end counts only for the batch awaited."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

import pytest

from rigmon.agent.collector_threads import Outcome, Runner
from rigmon.agent.ticks import TickScheduler
from rigmon.collectors.base import PolledCollector


class Counted(PolledCollector):
    name = "counted"

    def __init__(self) -> None:
        self.calls = 0

    def collect(self) -> Sequence[object]:
        self.calls += 1
        return []


async def test_an_earlier_batchs_end_does_not_end_the_batch_handed_to_the_same_runner() -> None:
    # The thread an overrunning collector kept can report its batch's end after the tick that
    # filed the result handed that collector's next batch to the same thread (it had not
    # finished returning, so it was not released): that report is not the new batch's end.
    counted = Counted()
    outcomes: list[tuple[str, Outcome, float]] = []
    published: list[int] = []

    def file_outcomes(results: list[tuple[str, Outcome, float]]) -> None:
        outcomes.extend(results)

    def publish() -> None:
        ticks.take_results()
        published.append(len(outcomes))

    ticks = TickScheduler({"counted": counted}, {"counted": 1.0}, 1.0, 5.0, file_outcomes,
                          lambda name, running_s: None, publish)
    task = asyncio.create_task(ticks.run())
    try:
        while not published:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the next batch waits on the collectors' thread for its time
        assert published == [1] and counted.calls == 1
        runner = ticks._runners.shared
        with runner.lock:
            assert runner.queued == ["counted"]
        ticks._batch_done(runner)  # the late report of the batch before
        assert published == [1]  # no frame for a batch that has not begun
        ticks.stop()  # and the handed-over batch is taken back
        await asyncio.wait_for(task, 5)
        await asyncio.sleep(1.2)  # past the time it would have begun
        assert counted.calls == 1 and published == [1]
    finally:
        ticks.stop()
        await asyncio.wait_for(task, 5)
        ticks.close()


async def test_stop_before_run_begins_returns_at_once() -> None:
    # An agent stopped before the sampler's task took its first step (no guard to wait for):
    # `run` must not wait on an end no tick will ever report.
    counted = Counted()
    ticks = TickScheduler({"counted": counted}, {"counted": 1.0}, 1.0, 5.0, lambda *a: None,
                          lambda name, running_s: None, lambda: None)
    ticks.stop()
    await asyncio.wait_for(ticks.run(), 2.0)
    ticks.close()
    assert counted.calls == 0


class _Stepping:
    """A wall clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.reads = 0

    def time(self) -> float:
        self.reads += 1
        return 1000.0 + self.reads

    def monotonic(self) -> float:
        return float(self.reads)


def test_the_calls_filed_in_one_look_share_one_clock_reading() -> None:
    # The sampler files a tick's outcomes as one pass: its clock is read once for all of them
    # (they were filed at the same moment), not once per collector.
    from rigmon.agent.sampler import Sampler

    names = ("a", "b", "c")
    clock = _Stepping()
    sampler = Sampler("n", "r", {name: Counted() for name in names}, 1.0, 5.0, clock)
    try:
        runner = sampler._ticks._runners.shared
        for name in names:
            runner.done.append((name, ("ok", []), 0.001))
        before = clock.reads
        sampler._ticks.take_results()
        assert clock.reads == before + 1
        stamps = {sampler._slots[name].status.sampled_at for name in names}
        assert stamps == {1000.0 + clock.reads}
    finally:
        sampler.close()


class _Held(PolledCollector):
    """A collector whose call returns when the test lets it."""

    name = "held"

    def __init__(self) -> None:
        self.go = threading.Event()
        self.calls = 0

    def collect(self) -> Sequence[object]:
        self.calls += 1
        self.go.wait(5.0)
        return []


def test_a_batch_that_ends_while_a_tick_starts_is_filed_and_called_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # The shared batch can end while the next tick starts, just before the tick asks whether
    # the runner is still busy: the tick must file that call's result and start the collector
    # again, not skip it as if its call still ran (nor call it hung past the timeout).
    held = _Held()
    outcomes: list[str] = []
    hung: list[str] = []
    ticks = TickScheduler({"held": held}, {"held": 1.0}, 1.0, 5.0,
                          lambda results: outcomes.extend(name for name, _, _ in results),
                          lambda name, running_s: hung.append(name), lambda: None)
    try:
        assert ticks._start_due(1.0)
        while not held.calls:
            time.sleep(0.01)
        busy = Runner.busy

        def batch_ends_then_busy(runner: Runner) -> bool:
            held.go.set()
            assert runner.future is not None
            runner.future.result(timeout=5.0)
            return busy.__get__(runner)

        monkeypatch.setattr(Runner, "busy", property(batch_ends_then_busy))
        second = ticks._start_due(2.0)
        monkeypatch.setattr(Runner, "busy", busy)
        assert outcomes == ["held"] and not hung
        assert second, "the collector was not started by the tick after its call returned"
        ticks._runners.shared.future.result(timeout=5.0)  # type: ignore[union-attr]
        assert held.calls == 2
    finally:
        held.go.set()
        ticks.close()
