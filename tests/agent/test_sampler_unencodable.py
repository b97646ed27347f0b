"""Sampler: a collector's record that cannot be encoded (an integer past 64 bits from a garbled
/proc file, a NaN) costs that collector, never the frame. Before, the integer ended the sampler (no
frame, no journal, for every collector) and the NaN made the frame unreadable to every reader."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

import pytest

from rigmon.agent.frame_json import frame_json
from rigmon.collectors.base import EventDraft, PolledCollector
from rigmon.schema import HostReading, TemperatureReading
from tests.agent.sampler_helpers import Quick, frames_until, make

HUGE = 2**70


class Garbled(PolledCollector):
    """Reports a value no frame can carry until told otherwise."""

    name = "garbled"

    def __init__(self, value: object) -> None:
        self.value = value
        self.good = False

    def collect(self) -> Sequence[object]:
        if self.good:
            return [TemperatureReading(sensor="g", label="garbled", temp_c=40.0)]
        if isinstance(self.value, int):
            return [HostReading(cpu_pct=1.0, cpu_count=self.value, load_1=None, load_5=None, load_15=None,
                                mem_total_bytes=None, mem_available_bytes=None, swap_total_bytes=None,
                                swap_free_bytes=None, uptime_s=None, boot_id=None)]
        return [TemperatureReading(sensor="g", label="garbled", temp_c=float(self.value))]  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [HUGE, math.nan], ids=["int-past-64-bits", "nan"])
async def test_a_record_that_cannot_be_sent_fails_its_collector_only(value: object) -> None:
    garbled = Garbled(value)
    sampler, frames = make({"quick": Quick(), "garbled": garbled})
    task = asyncio.create_task(sampler.run())
    try:
        bad = await frames_until(frames, lambda f: f.collectors["garbled"].state == "error")
        assert "cannot be sent" in (bad.collectors["garbled"].error or "")
        assert frame_json(bad)
        assert [t.sensor for t in bad.readings.temperatures] == ["q"] and bad.readings.host is None
        assert [e.kind for e in bad.events if e.subject == "collector:garbled"] == ["collector_failed"]
        # Sampling goes on, and the collector recovers once its values can be sent again.
        later = await frames_until(frames, lambda f: f.seq >= bad.seq + 3)
        assert later.collectors["quick"].state == "ok"
        garbled.good = True
        back = await frames_until(frames, lambda f: f.collectors["garbled"].state == "ok")
        assert sorted(t.sensor for t in back.readings.temperatures) == ["g", "q"]
    finally:
        sampler.stop()
        await task


class Odd(PolledCollector):
    """Reports an event whose data holds an integer past 64 bits (an Xid number from a garbled line)."""

    name = "odd"

    def collect(self) -> Sequence[object]:
        return [EventDraft(kind="xid", severity="critical", subject="gpu:0", message="Xid on GPU 0",
                           data={"xid": HUGE, "gpu_index": 0})]


async def test_an_event_value_that_cannot_be_sent_is_null() -> None:
    sampler, frames = make({"quick": Quick(), "odd": Odd()})
    task = asyncio.create_task(sampler.run())
    try:
        frame = await frames_until(frames, lambda f: any(e.kind == "xid" for e in f.events))
        later = await frames_until(frames, lambda f: f.seq >= frame.seq + 2)
    finally:
        sampler.stop()
        await task
    xid = next(e for e in frame.events if e.kind == "xid")
    assert xid.data == {"xid": None, "gpu_index": 0}
    assert frame_json(frame) and later.collectors["odd"].state == "ok"
