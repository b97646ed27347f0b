"""Sampler ticks: every collector due is called, the loop waits on one future, a stop or a failure ends
a tick, handed-over batches."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

from rigmon.agent.sampler import Sampler
from rigmon.clock import SystemClock
from rigmon.collectors.base import PolledCollector
from rigmon.schema import CollectorStatus, Frame, TemperatureReading
from tests.agent.sampler_helpers import Pushing, Quick, frames_until, make


async def test_every_tick_calls_the_collectors_due() -> None:
    # A tick woken a little late used to find the collectors not yet due at the next one,
    # so about a third of the frames repeated old readings.
    quick = Quick()
    sampler, frames = make({"quick": quick}, interval_s=0.05)
    task = asyncio.create_task(sampler.run())
    try:
        await frames_until(frames, lambda f: f.seq >= 30)
    finally:
        sampler.stop()
        await task
    assert quick.n >= len(frames) - 1


async def test_waiting_for_the_tick_starts_no_task() -> None:
    """Between ticks the sampler waits on one future and one timer: a task per wait (as
    ``asyncio.wait_for(event.wait(), delay)`` starts) is one more turn of the event loop each
    time, on an agent that should wake once a second."""
    pushing = Pushing()
    sampler, frames = make({"pushing": pushing}, interval_s=30.0)
    task = asyncio.create_task(sampler.run())
    try:
        await frames_until(frames, lambda f: f.seq == 1)
        await asyncio.sleep(0.05)  # into the wait for the next tick
        assert asyncio.all_tasks() == {task, asyncio.current_task()}
        assert pushing.push is not None
        pushing.push([TemperatureReading("adc", "rail", 11.4)])  # from the loop's own thread: still queued safely
        await frames_until(frames, lambda f: f.seq == 2, timeout_s=5.0)
        await asyncio.sleep(0.05)
        assert asyncio.all_tasks() == {task, asyncio.current_task()}
    finally:
        sampler.stop()
        await asyncio.wait_for(task, 5)
    assert task.done()


async def test_ticks_run_as_loop_callbacks_while_run_waits_on_one_future() -> None:
    """A tick is one call back from the collectors' thread (a timer too when a collector overran): the `run`
    coroutine is not woken for it (awaiting ``run_in_executor`` futures through ``asyncio.wait``
    and a future per wait took five turns of the event loop a tick)."""
    quick = Quick()
    sampler, frames = make({"quick": quick}, interval_s=0.02)
    task = asyncio.create_task(sampler.run())
    try:
        await frames_until(frames, lambda f: f.seq >= 2)
        awaited = task.get_coro().cr_await  # type: ignore[union-attr]
        seq = frames[-1].seq
        await frames_until(frames, lambda f: f.seq >= seq + 10)
        assert task.get_coro().cr_await is awaited  # type: ignore[union-attr]
        assert asyncio.all_tasks() == {task, asyncio.current_task()}
    finally:
        sampler.stop()
        await asyncio.wait_for(task, 5)
    assert quick.n >= 12


async def test_a_failing_tick_ends_run_with_its_error() -> None:
    sampler, frames = make({"quick": Quick()}, interval_s=0.02)
    task = asyncio.create_task(sampler.run())
    await frames_until(frames, lambda f: f.seq >= 2)

    def broken() -> CollectorStatus:
        raise RuntimeError("frame assembly bug")

    # A status source that raises breaks the next frame's assembly (a bug, not a collector's failure).
    sampler.add_status("journal", broken)
    try:
        await asyncio.wait_for(task, 5)
    except RuntimeError as exc:
        assert str(exc) == "frame assembly bug"
    else:
        raise AssertionError("run() returned normally")


async def test_stop_during_a_tick_publishes_that_tick_then_returns() -> None:
    gate = threading.Event()

    class Gated(PolledCollector):
        name = "gated"

        def collect(self) -> Sequence[object]:
            gate.wait(5)
            return [TemperatureReading(sensor="g", label="gated", temp_c=1.0)]

    sampler, frames = make({"gated": Gated()}, interval_s=10.0, timeout_s=5.0)
    task = asyncio.create_task(sampler.run())
    await asyncio.sleep(0.05)  # the first tick waits for the gated collector
    sampler.stop()
    assert not task.done()
    gate.set()
    await asyncio.wait_for(task, 5)
    assert [f.seq for f in frames] == [1]
    assert frames[0].readings.temperatures[0].sensor == "g"


async def test_a_tick_wakes_the_event_loop_once() -> None:
    """The collectors' thread starts each tick's batch on time by itself (handed over when the
    last tick ended): the loop wakes once a tick, for the batch's end, not also for its start."""
    quick = Quick()
    sampler, frames = make({"quick": quick}, interval_s=0.05)
    loop = asyncio.get_running_loop()
    turns = 0
    run_once = loop._run_once  # type: ignore[attr-defined]

    def counted() -> None:
        nonlocal turns
        turns += 1
        run_once()

    task = asyncio.create_task(sampler.run())
    try:
        await frames_until(frames, lambda f: f.seq >= 2)
        loop._run_once = counted  # type: ignore[attr-defined]
        first = frames[-1].seq
        await asyncio.sleep(1.0)  # ~20 ticks; this sleep itself costs a turn or two
        loop._run_once = run_once  # type: ignore[attr-defined]
        ticks = frames[-1].seq - first
    finally:
        loop._run_once = run_once  # type: ignore[attr-defined]
        sampler.stop()
        await asyncio.wait_for(task, 5)
    assert ticks >= 10
    assert turns <= ticks + 3  # a timer starting each tick made it two turns a tick
    assert quick.n >= frames[-1].seq - 1  # every tick still collected


async def test_stop_before_a_handed_over_batch_begins_calls_no_collector() -> None:
    quick = Quick()
    sampler, frames = make({"quick": quick}, interval_s=0.3)
    task = asyncio.create_task(sampler.run())
    await frames_until(frames, lambda f: f.seq >= 1)
    await asyncio.sleep(0.05)  # the next batch waits in the collectors' thread for its time
    calls = quick.n
    sampler.stop()
    await asyncio.wait_for(task, 5)
    await asyncio.sleep(0.5)  # past the time it would have begun
    assert [f.seq for f in frames] == [1]
    assert quick.n == calls


async def test_a_reading_pushed_during_a_handed_over_tick_is_published_at_once() -> None:
    gate = threading.Event()
    pushing = Pushing()

    class Gated(PolledCollector):
        name = "gated"

        def __init__(self) -> None:
            self.calls = 0

        def collect(self) -> Sequence[object]:
            self.calls += 1
            if self.calls == 2:
                gate.wait(5)  # the second tick waits here while a reading is pushed
            return [TemperatureReading(sensor="g", label="gated", temp_c=float(self.calls))]

    gated = Gated()
    # Polled once only: a later call's empty result would replace what it pushed.
    collectors: dict[str, object] = {"gated": gated, "pushing": pushing}
    sampler = Sampler("n1", "run1", collectors, 0.2, 5.0, SystemClock(),  # type: ignore[arg-type]
                      intervals={"pushing": 3600.0})
    frames: list[Frame] = []
    sampler.add_listener(frames.append)
    task = asyncio.create_task(sampler.run())
    try:
        await frames_until(frames, lambda f: f.seq >= 1)
        while gated.calls < 2:
            await asyncio.sleep(0.01)
        assert pushing.push is not None
        pushing.push([TemperatureReading("adc", "rail", 11.4)])
        # Published at once, in a frame of its own, while the tick is in progress (held for the tick's
        # frame, the pushing collector's own poll answering after it would replace it: see below).
        pushed = await frames_until(frames, lambda f: f.seq >= 2)
        assert {t.sensor for t in pushed.readings.temperatures} == {"g", "adc"} and gated.calls == 2
        gate.set()
        third = await frames_until(frames, lambda f: f.seq >= 3)
        assert {(t.sensor, t.temp_c) for t in third.readings.temperatures} == {("g", 2.0), ("adc", 11.4)}
    finally:
        gate.set()
        sampler.stop()
        await asyncio.wait_for(task, 5)


def test_a_handed_over_batch_starts_at_its_time_and_a_wake_ends_its_wait() -> None:
    from rigmon.agent.collector_threads import new_runner, run_batch, wake

    started_at: list[float] = []

    class Timed(PolledCollector):
        name = "timed"

        def collect(self) -> Sequence[object]:
            started_at.append(time.monotonic())
            return []

    timed = Timed()
    runner = new_runner("test-runner")
    done: list[object] = []
    runner.queued = ["timed"]
    start_at = time.monotonic() + 0.2
    runner.executor.submit(run_batch, runner, lambda name: timed, done.append, start_at).result(5)
    assert started_at and started_at[0] >= start_at and done == [runner]
    # Taken back before its time: the queue is emptied and the wait ends at once.
    runner.queued = ["timed"]
    future = runner.executor.submit(run_batch, runner, lambda name: timed, done.append, time.monotonic() + 3600)
    with runner.lock:
        runner.queued = []
    wake(runner)
    wake(runner)  # a second wake (stop, then close) is harmless
    future.result(5)
    assert len(started_at) == 1 and done == [runner, runner]
    runner.executor.shutdown()


async def test_a_pinned_runners_late_batch_end_does_not_begin_a_handed_over_tick() -> None:
    """The thread an overrunning collector kept reports the end of its batch after the tick that
    filed its result handed the next tick's batch over: that report must not mark the handed-over
    tick in progress (its batch has not begun), so `stop` still takes the batch back."""
    slow_gate, quick_gate = threading.Event(), threading.Event()
    slow_returned, held_returned = threading.Event(), threading.Event()

    class Slow(PolledCollector):
        """Overruns its first tick until released; quick afterwards."""

        name = "slow"

        def __init__(self) -> None:
            self.calls = 0

        def collect(self) -> Sequence[object]:
            self.calls += 1
            if self.calls == 1:
                slow_gate.wait(5)
                slow_returned.set()
            return [TemperatureReading(sensor="s", label="slow", temp_c=float(self.calls))]

    class Held(PolledCollector):
        """Holds its second call (the tick that pins the slow collector's thread) until released."""

        name = "held"

        def __init__(self) -> None:
            self.calls = 0

        def collect(self) -> Sequence[object]:
            self.calls += 1
            if self.calls == 2:
                quick_gate.wait(5)
                held_returned.set()
            return [TemperatureReading(sensor="h", label="held", temp_c=float(self.calls))]

    slow, held = Slow(), Held()
    # 1 s ticks, a 0.6 s wait: the first tick ends without the slow collector (the held one
    # queued behind it), the next ones pin the slow one's thread and run the held one on a fresh
    # one: its first call at once, its second held.
    sampler, frames = make({"slow": slow, "held": held}, interval_s=1.0, timeout_s=5.0)
    task = asyncio.create_task(sampler.run())
    try:
        while held.calls < 2:
            await asyncio.sleep(0.01)
        published = len(frames)
        # With the loop held, the held collector's batch ends first, then the slow one's (on the
        # thread it kept): the loop sees the tick's end, files both and hands the next tick's
        # batch over, and only then gets the slow thread's report.
        quick_gate.set()
        assert held_returned.wait(5)
        time.sleep(0.05)  # its thread reports the batch's end
        slow_gate.set()
        assert slow_returned.wait(5)
        time.sleep(0.05)
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(frames) == published + 1 and frames[-1].collectors["slow"].state == "ok"
        calls = slow.calls, held.calls
        sampler.stop()  # before the handed-over batch's time (~0.8 s from now)
        await asyncio.wait_for(task, 5)
        await asyncio.sleep(1.0)  # past the time it would have begun
        assert (slow.calls, held.calls) == calls
        assert len(frames) == published + 1
    finally:
        slow_gate.set()
        quick_gate.set()
        sampler.stop()
        await asyncio.wait_for(task, 5)


async def test_a_reading_pushed_during_a_tick_is_in_a_frame_though_its_collector_answers_after_it() -> None:
    # The ADC reader pushes a sag window at once (the rail collector's reading of it, reset after); the same
    # collector's poll of that tick answers after the push with the windows since. Held for the tick's frame,
    # the pushed reading was replaced by the poll's: the sag reached no frame, no alarm, no guard, no journal.
    gate = threading.Event()
    polled = threading.Event()

    class Rail(PolledCollector):
        name = "rail"

        def __init__(self) -> None:
            self.calls = 0
            self.push: object = None

        def start(self, push: object) -> None:
            self.push = push

        def collect(self) -> Sequence[object]:
            self.calls += 1
            if self.calls == 2:
                polled.set()
                gate.wait(5)  # the push arrives while this poll runs
            return [TemperatureReading(sensor="rail", label="poll", temp_c=float(self.calls))]

    rail = Rail()
    sampler, frames = make({"rail": rail}, interval_s=0.2, timeout_s=5.0)
    task = asyncio.create_task(sampler.run())
    try:
        await frames_until(frames, lambda f: f.seq >= 1)
        await asyncio.get_running_loop().run_in_executor(None, polled.wait, 5)
        assert callable(rail.push)
        rail.push([TemperatureReading(sensor="rail", label="sag", temp_c=-1.0)])
        await asyncio.sleep(0.05)
        gate.set()
        await frames_until(frames, lambda f: any(t.label == "poll" and t.temp_c == 2.0
                                                 for t in f.readings.temperatures))
        assert any(t.label == "sag" for f in frames for t in f.readings.temperatures), \
            [(f.seq, [(t.label, t.temp_c) for t in f.readings.temperatures]) for f in frames]
    finally:
        gate.set()
        sampler.stop()
        await asyncio.wait_for(task, 5)
