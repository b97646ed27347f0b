"""Helpers of the sampler tests: a quick and a pushing collector, and a sampler that keeps its frames."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from rigmon.agent.sampler import Sampler
from rigmon.clock import SystemClock
from rigmon.collectors.base import PolledCollector, PushFn
from rigmon.schema import Frame, TemperatureReading


class Quick(PolledCollector):
    name = "quick"

    def __init__(self) -> None:
        self.n = 0

    def collect(self) -> Sequence[object]:
        self.n += 1
        return [TemperatureReading(sensor="q", label="quick", temp_c=float(self.n))]


class Pushing(PolledCollector):
    name = "pushing"

    def __init__(self) -> None:
        self.push: PushFn | None = None

    def start(self, push: PushFn) -> None:
        self.push = push

    def collect(self) -> Sequence[object]:
        return []


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


async def first_sampled_frame(collector: PolledCollector) -> Frame:
    """Run a sampler over ``collector`` alone (under its ``name``) until a frame holds one of its samples; that frame."""
    name = collector.name
    sampler = Sampler("n1", "run1", {name: collector}, 0.05, 2.0, SystemClock())
    frames: list[Frame] = []
    sampler.add_listener(frames.append)
    task = asyncio.create_task(sampler.run())
    try:
        for _ in range(400):
            if frames and frames[-1].collectors[name].sampled_at is not None:
                break
            await asyncio.sleep(0.01)
    finally:
        sampler.stop()
        await task
    return frames[-1]
