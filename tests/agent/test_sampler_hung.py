"""Sampler: a collector whose own watchdog gave up (CollectorHung) is reported hung, then recovers; a stall of the
whole agent is no collector's hang."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

from rigmon.agent.sampler import Sampler
from rigmon.clock import SystemClock
from rigmon.collectors.base import CollectorHung, PolledCollector
from rigmon.schema import Frame


class FlakyDriver(PolledCollector):
    name = "flaky"

    def __init__(self) -> None:
        self.hung = True

    def collect(self) -> Sequence[object]:
        if self.hung:
            raise CollectorHung("an NVML call did not return within 2 s")
        return []


async def test_collector_hung_state_and_recovery() -> None:
    collector = FlakyDriver()
    sampler = Sampler("n", "run", {"flaky": collector}, interval_s=0.05, timeout_s=5, clock=SystemClock())
    frames: list[Frame] = []
    sampler.add_listener(frames.append)
    task = asyncio.create_task(sampler.run())
    try:
        for _ in range(400):
            states = [f.collectors["flaky"].state for f in frames]
            if "hung" in states and collector.hung:
                collector.hung = False
            if states and states[-1] == "ok" and "hung" in states:
                break
            await asyncio.sleep(0.01)
    finally:
        sampler.stop()
        await asyncio.wait_for(task, 5)
    states = [f.collectors["flaky"].state for f in frames]
    assert "hung" in states and states[-1] == "ok"
    hung = next(f.collectors["flaky"] for f in frames if f.collectors["flaky"].state == "hung")
    assert not hung.ok and hung.error == "an NVML call did not return within 2 s"
    kinds = [e.kind for f in frames for e in f.events]
    assert "collector_failed" in kinds and "collector_recovered" in kinds


class StuckDriver(PolledCollector):
    """A call that hangs for real (until released), from its first call on."""

    name = "stuck"

    def __init__(self) -> None:
        self.release = threading.Event()

    def collect(self) -> Sequence[object]:
        self.release.wait(30)
        return []


async def test_a_call_that_hangs_for_real_is_still_hung_after_the_agent_stood_still() -> None:
    """The loop does not run for a while (as when the process is stopped, here the loop is held
    with the process idle): the call in flight is not blamed for that time, the stall is said once,
    and a call that keeps hanging after it is reported hung all the same."""
    collector = StuckDriver()
    sampler = Sampler("n", "run", {"stuck": collector}, interval_s=0.05, timeout_s=0.3, clock=SystemClock())
    frames: list[Frame] = []
    sampler.add_listener(frames.append)
    task = asyncio.create_task(sampler.run())
    try:
        while not frames:
            await asyncio.sleep(0.01)
        time.sleep(1.5)  # the loop stands still, the process idle: a stall
        for _ in range(500):
            if frames[-1].collectors["stuck"].state == "hung":
                break
            await asyncio.sleep(0.01)
    finally:
        collector.release.set()
        sampler.stop()
        await asyncio.wait_for(task, 5)
    events = [e for f in frames for e in f.events]
    kinds = [e.kind for e in events]
    assert kinds.count("agent_stalled") == 1, kinds
    stalled_at = kinds.index("agent_stalled")
    # Not blamed for the stall: reported hung only after it, once it kept hanging.
    assert kinds[stalled_at + 1:].count("collector_failed") == 1 and "collector_failed" not in kinds[:stalled_at]
    stall_frame = next(i for i, f in enumerate(frames) if any(e.kind == "agent_stalled" for e in f.events))
    assert frames[stall_frame].collectors["stuck"].state == "pending", frames[stall_frame].collectors


class WatchdogThroughStall(PolledCollector):
    """Its own watchdog (as NVML's) gives up on the call in flight while the agent stands still;
    the calls after it answer."""

    name = "nvml"

    def __init__(self) -> None:
        self.calls = 0
        self.started = threading.Event()

    def collect(self) -> Sequence[object]:
        self.calls += 1
        if self.calls == 3:
            self.started.set()
            time.sleep(0.5)  # the watchdog's timeout runs out during the stall
            raise CollectorHung("an NVML call did not return within 0.5 s")
        return []


async def test_a_collectors_own_watchdog_that_ran_out_during_the_stall_blames_nothing() -> None:
    collector = WatchdogThroughStall()
    sampler = Sampler("n", "run", {"nvml": collector}, interval_s=0.05, timeout_s=5, clock=SystemClock())
    frames: list[Frame] = []
    sampler.add_listener(frames.append)
    task = asyncio.create_task(sampler.run())
    try:
        while not collector.started.is_set():
            await asyncio.sleep(0.001)
        time.sleep(1.5)  # the loop stands still, the process idle: a stall
        while collector.calls < 6:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
    finally:
        sampler.stop()
        await asyncio.wait_for(task, 5)
    kinds = [e.kind for f in frames for e in f.events]
    assert kinds.count("agent_stalled") == 1, kinds
    assert "collector_failed" not in kinds, kinds
    assert {f.collectors["nvml"].state for f in frames} <= {"pending", "ok"}


class HeldFirstCall(PolledCollector):
    """Its first call runs until released (``ahead``: it holds up the calls behind it in the batch;
    ``behind``: called after it in the same batch, not hung)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.started = threading.Event()
        self.release = threading.Event()

    def collect(self) -> Sequence[object]:
        if not self.started.is_set():
            self.started.set()
            self.release.wait(30)
        return []


async def test_a_call_is_timed_from_its_own_start_not_from_its_wait_behind_others_in_the_batch() -> None:
    """A collector waits in its batch behind a slow one, then its own call runs until after the next
    tick, which finds it running for less than the timeout since it started, though for more since
    the tick before: it is not hung. (It counted from the tick and was reported hung, "no answer
    for 3.0 s", as on a loaded machine where a first GPU poll ahead of it is slow.) Ticks are 3 s
    apart, so that none comes while the first call runs and a tick late by up to 1 s changes nothing."""
    ahead, behind = HeldFirstCall("ahead"), HeldFirstCall("behind")
    sampler = Sampler("n", "run", {"ahead": ahead, "behind": behind}, interval_s=3.0, timeout_s=2.5,
                      clock=SystemClock())
    frames: list[Frame] = []
    sampler.add_listener(frames.append)
    task = asyncio.create_task(sampler.run())
    try:
        while not ahead.started.is_set():
            await asyncio.sleep(0.01)
        await asyncio.sleep(1.5)
        ahead.release.set()  # the call behind it starts now
        while not behind.started.is_set():
            await asyncio.sleep(0.01)
        # The first tick's frame (its wait for the collectors ran out), then the second tick's,
        # which checked the call behind against the timeout while it still ran.
        while len(frames) < 2:
            await asyncio.sleep(0.01)
    finally:
        ahead.release.set()
        behind.release.set()
        sampler.stop()
        await asyncio.wait_for(task, 10)
    events = [(e.kind, e.subject, e.message) for f in frames for e in f.events]
    assert not [e for e in events if e[1] == "collector:behind"], events
    assert [f.collectors["behind"].state for f in frames[:2]] == ["pending", "pending"]
