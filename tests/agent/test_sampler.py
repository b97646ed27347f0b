"""Sampler: per-collector threads, hung and failing collectors, pushed readings, events."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

from rigmon.collectors.base import EventDraft, NoData, PolledCollector
from rigmon.schema import TemperatureReading
from tests.agent.sampler_helpers import Pushing, Quick, frames_until, make


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


class Weird(PolledCollector):
    name = "weird"

    def collect(self) -> Sequence[object]:
        return [object()]


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
