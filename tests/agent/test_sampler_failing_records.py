"""A collector that fails may still say what it reads (`CollectorError.records`: an unplugged rail ADC's
reading, ``connected`` false, with its counters): the frame carries those records, the state is ``error``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from rigmon.agent.collector_threads import Failed, call_collector
from rigmon.agent.sampler import Sampler
from rigmon.clock import SystemClock
from rigmon.collectors.base import CollectorError, PolledCollector
from rigmon.collectors.psu_rail import RailState
from rigmon.config import PsuSection
from rigmon.schema import Frame, PsuRailReading


def gone_reading() -> PsuRailReading:
    """A rail ADC's reading after its port went away."""
    state = RailState(PsuSection(port="/dev/rigmon-psu0"))
    state.opened(0.0)
    state.closed("/dev/rigmon-psu0: Input/output error")
    return state.reading(1.0, reset=True)


class FailingCollector(PolledCollector):
    """Fails every call, with ``records`` or without."""

    name = "psu"

    def __init__(self, records: Sequence[object]) -> None:
        self.records = records

    def collect(self) -> Sequence[object]:
        raise CollectorError("psu.port /dev/rigmon-psu0: Input/output error; retrying", records=self.records)


async def last_frame(collector: PolledCollector) -> Frame:
    sampler = Sampler("n1", "run1", {"psu": collector}, 0.05, 2.0, SystemClock())
    frames: list[Frame] = []
    sampler.add_listener(frames.append)
    task = asyncio.create_task(sampler.run())
    try:
        for _ in range(400):
            if frames and frames[-1].collectors["psu"].sampled_at is not None:
                break
            await asyncio.sleep(0.01)
    finally:
        sampler.stop()
        await task
    return frames[-1]


def test_an_error_with_records_is_an_error_outcome_with_them() -> None:
    reading = gone_reading()
    state, payload = call_collector(FailingCollector([reading]))
    assert state == "error" and isinstance(payload, Failed)
    assert payload.records == [reading] and payload.error.startswith("CollectorError: psu.port")
    assert call_collector(FailingCollector([])) == (
        "error", "CollectorError: psu.port /dev/rigmon-psu0: Input/output error; retrying")


async def test_a_failing_collectors_records_are_in_the_frame_and_its_state_is_error() -> None:
    reading = gone_reading()
    assert not reading.connected and reading.stale and reading.volts is None
    frame = await last_frame(FailingCollector([reading]))
    status = frame.collectors["psu"]
    assert (status.state, status.ok) == ("error", False)
    assert status.error == "CollectorError: psu.port /dev/rigmon-psu0: Input/output error; retrying"
    assert frame.readings.psu_rail == reading
    assert (await last_frame(FailingCollector([]))).readings.psu_rail is None
