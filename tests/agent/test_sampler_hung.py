"""Sampler: a collector whose own watchdog gave up (CollectorHung) is reported hung, then recovers."""

from __future__ import annotations

import asyncio
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
