"""Sampler: per-collector threads, hung and failing collectors, pushed readings, events."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

from rigmon.agent.sampler import Sampler
from rigmon.clock import SystemClock
from rigmon.collectors.base import EventDraft, NoData, PolledCollector, PushFn
from rigmon.schema import CollectorStatus, Frame, TemperatureReading


class Quick(PolledCollector):
    name = "quick"

    def __init__(self) -> None:
        self.n = 0

    def collect(self) -> Sequence[object]:
        self.n += 1
        return [TemperatureReading(sensor="q", label="quick", temp_c=float(self.n))]


class Hanging(PolledCollector):
    """Blocks inside collect() until released, like an NVML call in a dying driver."""

    name = "hanging"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def collect(self) -> Sequence[object]:
        self.calls += 1
        self.release.wait(10)
        return [TemperatureReading(sensor="h", label="hanging", temp_c=1.0)]


class Sometimes(PolledCollector):
    """Quick, but its next call takes longer than a tick when told to."""

    def __init__(self, sensor: str) -> None:
        self.sensor = sensor
        self.slow_next = threading.Event()
        self.calls = self.slow_calls = 0

    def collect(self) -> Sequence[object]:
        self.calls += 1
        if self.slow_next.is_set():
            self.slow_next.clear()
            self.slow_calls += 1
            time.sleep(0.3)
        return [TemperatureReading(sensor=self.sensor, label=self.sensor, temp_c=float(self.calls))]


class Flaky(PolledCollector):
    name = "flaky"

    def __init__(self) -> None:
        self.mode = "fail"

    def collect(self) -> Sequence[object]:
        if self.mode == "fail":
            raise OSError("read error")
        if self.mode == "absent":
            raise NoData("no such hardware")
        return [EventDraft(kind="link_speed_changed", severity="warning", subject="link:0", message="40 -> 20")]


class Pushing(PolledCollector):
    name = "pushing"

    def __init__(self) -> None:
        self.push: PushFn | None = None

    def start(self, push: PushFn) -> None:
        self.push = push

    def collect(self) -> Sequence[object]:
        return []


class Weird(PolledCollector):
    name = "weird"

    def collect(self) -> Sequence[object]:
        return [object()]


async def frames_until(frames: list[Frame], predicate: object, timeout_s: float = 10.0) -> Frame:
    deadline = asyncio.get_running_loop().time() + timeout_s
    seen = 0
    while asyncio.get_running_loop().time() < deadline:
        for frame in frames[seen:]:
            if predicate(frame):  # type: ignore[operator]
                return frame
        seen = len(frames)
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


def make(collectors: dict[str, object], interval_s: float = 0.05, timeout_s: float = 0.2) -> tuple[Sampler, list[Frame]]:
    sampler = Sampler("n1", "run1", collectors, interval_s, timeout_s, SystemClock())  # type: ignore[arg-type]
    frames: list[Frame] = []
    sampler.add_listener(frames.append)
    return sampler, frames


async def test_hung_collector_does_not_stall_the_others() -> None:
    quick, hanging = Quick(), Hanging()
    sampler, frames = make({"quick": quick, "hanging": hanging})
    task = asyncio.create_task(sampler.run())
    try:
        hung = await frames_until(frames, lambda f: f.collectors["hanging"].state == "hung")
        # Frames keep coming with fresh quick readings while the other collector hangs.
        later = await frames_until(frames, lambda f: f.seq > hung.seq + 5)
        assert later.readings.temperatures[0].temp_c > hung.readings.temperatures[0].temp_c
        assert hanging.calls == 1  # never called again while stuck
        assert any(e.kind == "collector_failed" and e.subject == "collector:hanging" for f in frames for e in f.events)
        hanging.release.set()
        recovered = await frames_until(frames, lambda f: f.collectors["hanging"].state == "ok")
        assert {t.sensor for t in recovered.readings.temperatures} == {"q", "h"}
        assert any(e.kind == "collector_recovered" for f in frames for e in f.events)
    finally:
        hanging.release.set()
        sampler.stop()
        await task
    seqs = [f.seq for f in frames]
    assert seqs == list(range(1, len(seqs) + 1))


async def test_failure_absent_and_recovery_states_and_events() -> None:
    flaky = Flaky()
    sampler, frames = make({"flaky": flaky})
    task = asyncio.create_task(sampler.run())
    try:
        failed = await frames_until(frames, lambda f: f.collectors["flaky"].state == "error")
        assert failed.collectors["flaky"].error == "OSError: read error"
        assert not failed.collectors["flaky"].ok
        await frames_until(frames, lambda f: f.seq > failed.seq + 3)
        failures = [e for f in frames for e in f.events if e.kind == "collector_failed"]
        assert len(failures) == 1  # once, not on every tick
        flaky.mode = "absent"
        absent = await frames_until(frames, lambda f: f.collectors["flaky"].state == "absent")
        assert absent.collectors["flaky"].ok
        flaky.mode = "ok"
        await frames_until(frames, lambda f: any(e.kind == "link_speed_changed" for e in f.events))
    finally:
        sampler.stop()
        await task
    kinds = [e.kind for f in frames for e in f.events]
    assert kinds[0] == "agent_started"
    ids = [e.id for f in frames for e in f.events]
    assert len(ids) == len(set(ids))


async def test_pushed_reading_is_published_before_the_next_tick() -> None:
    pushing = Pushing()
    sampler, frames = make({"pushing": pushing}, interval_s=30.0)
    task = asyncio.create_task(sampler.run())
    try:
        await frames_until(frames, lambda f: f.seq == 1)
        assert pushing.push is not None
        threading.Thread(target=pushing.push, args=([TemperatureReading("adc", "rail", 11.384)],)).start()
        frame = await frames_until(frames, lambda f: bool(f.readings.temperatures), timeout_s=5.0)
        assert frame.readings.temperatures[0].temp_c == 11.384
        assert frame.seq == 2  # published on arrival, not after the 30 s tick
    finally:
        sampler.stop()
        await task


async def test_unknown_record_type_is_a_collector_error() -> None:
    sampler, frames = make({"weird": Weird()})
    task = asyncio.create_task(sampler.run())
    try:
        frame = await frames_until(frames, lambda f: f.collectors["weird"].state == "error")
        assert "unknown type" in (frame.collectors["weird"].error or "")
    finally:
        sampler.stop()
        await task


async def test_collector_queued_behind_a_hung_one_keeps_sampling() -> None:
    # The hanging collector comes first, so the quick one waits behind it on the shared
    # thread: it must move to another thread and keep sampling.
    hanging, quick = Hanging(), Quick()
    sampler, frames = make({"hanging": hanging, "quick": quick})
    before = collector_threads()
    task = asyncio.create_task(sampler.run())
    try:
        hung = await frames_until(frames, lambda f: f.collectors["hanging"].state == "hung")
        later = await frames_until(frames, lambda f: f.seq > hung.seq + 5)
        assert later.collectors["quick"].state == "ok"
        assert later.readings.temperatures[0].temp_c > hung.readings.temperatures[0].temp_c
        assert hanging.calls == 1
        hanging.release.set()
        recovered = await frames_until(frames, lambda f: f.collectors["hanging"].state == "ok")
        assert {t.sensor for t in recovered.readings.temperatures} == {"q", "h"}
        # Called again once its stuck call returned, back on the shared thread: the thread it
        # kept while stuck ends, so the collector threads are as many as before the hang.
        await frames_until(frames, lambda f: hanging.calls > 1)
        await frames_until(frames, lambda f: collector_threads() - before <= 1)
    finally:
        hanging.release.set()
        sampler.stop()
        await task


def collector_threads() -> int:
    return sum(t.name.startswith("rigmon-collectors") and t.is_alive() for t in threading.enumerate())


async def test_collectors_that_overran_now_and_then_do_not_gather_threads() -> None:
    # A loaded machine makes calls overrun a tick now and then; each one pins a thread for a
    # while, but once the calls return the threads end.
    slow = [Sometimes(f"s{i}") for i in range(4)]
    sampler, frames = make({c.sensor: c for c in slow}, interval_s=0.05)
    before = collector_threads()
    task = asyncio.create_task(sampler.run())
    try:
        for c in slow:
            c.slow_next.set()
            await frames_until(frames, lambda f, c=c: c.slow_calls >= 1 and f.collectors[c.sensor].state == "ok")
        await frames_until(frames, lambda f: all(c.calls >= 20 for c in slow) and collector_threads() - before <= 1)
    finally:
        sampler.stop()
        await task
    assert sum(c.slow_calls for c in slow) == 4


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


async def test_a_reading_pushed_during_a_handed_over_tick_goes_into_its_frame() -> None:
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
        await asyncio.sleep(0.05)
        assert [f.seq for f in frames] == [1]  # held for the tick in progress
        gate.set()
        second = await frames_until(frames, lambda f: f.seq >= 2)
        assert {t.sensor for t in second.readings.temperatures} == {"g", "adc"}
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
