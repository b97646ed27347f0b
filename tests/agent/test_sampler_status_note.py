"""A collector whose call succeeds may say in its status what does not work beside its readings
(the GPU collector's NVML Xid events): the state stays ok, the text is in ``error``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from rigmon.agent.sampler import Sampler
from rigmon.clock import SystemClock
from rigmon.collectors.base import PolledCollector, status_note
from rigmon.schema import Frame


class NotingCollector(PolledCollector):
    """Reads nothing, fine; says ``note`` beside it."""

    name = "noting"

    def __init__(self, note: str | None) -> None:
        self.note = note

    def collect(self) -> Sequence[object]:
        return []

    def status_note(self) -> str | None:
        return self.note


async def last_frame(collector: PolledCollector) -> Frame:
    sampler = Sampler("n1", "run1", {"noting": collector}, 0.05, 2.0, SystemClock())
    frames: list[Frame] = []
    sampler.add_listener(frames.append)
    task = asyncio.create_task(sampler.run())
    try:
        for _ in range(400):
            if frames and frames[-1].collectors["noting"].sampled_at is not None:
                break
            await asyncio.sleep(0.01)
    finally:
        sampler.stop()
        await task
    return frames[-1]


async def test_an_ok_collectors_note_is_in_its_status() -> None:
    status = (await last_frame(NotingCollector("NVML Xid events not received"))).collectors["noting"]
    assert (status.state, status.ok, status.error) == ("ok", True, "NVML Xid events not received")
    quiet = (await last_frame(NotingCollector(None))).collectors["noting"]
    assert (quiet.state, quiet.ok, quiet.error) == ("ok", True, None)


def test_a_collector_without_a_note_says_nothing() -> None:
    assert status_note(PolledCollector()) is None
