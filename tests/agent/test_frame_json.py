"""frame_json: a frame's wire JSON encoded once and shared; the cached bytes equal a fresh encode."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import httpx
import msgspec

from rigmon.agent.agent import Agent
from rigmon.agent.frame_json import ENCODED, EncodedFrames
from rigmon.collectors.base import PolledCollector
from rigmon.config import AgentConfig, AgentSection, JournalSection
from rigmon.schema import SCHEMA_VERSION, CollectorStatus, Frame, Readings, TemperatureReading, decode, encode


def frame(seq: int, temp_c: float = 41.5) -> Frame:
    return Frame(schema=SCHEMA_VERSION, node="n1", run_id="r1", seq=seq, taken_at=1_700_000_000.0 + seq,
                 agent_start=1_700_000_000.0,
                 collectors={"host": CollectorStatus(state="ok", ok=True, duration_s=0.001)},
                 readings=Readings(temperatures=(TemperatureReading("hwmon0/temp1", "k10temp Tctl", temp_c),)))


def test_cached_encoding_equals_a_fresh_one_and_is_made_once() -> None:
    cache = EncodedFrames(keep=4)
    f = frame(1)
    first = cache.get(f)
    assert first == encode(f)
    assert cache.get(f) is first
    assert (cache.hits, cache.misses) == (1, 1)
    assert decode(Frame, first) == f


def test_equal_looking_frames_are_not_confused_and_old_ones_are_dropped() -> None:
    cache = EncodedFrames(keep=2)
    a, b = frame(1, 40.0), frame(1, 60.0)  # same seq, other content (another agent, another run)
    assert cache.get(a) == encode(a) and cache.get(b) == encode(b)
    assert cache.get(a) != cache.get(b)
    c = frame(2)
    cache.get(c)  # a was used less recently than b: dropped
    misses = cache.misses
    assert cache.get(a) == encode(a)
    assert cache.misses == misses + 1
    # A frame rebuilt field by field is a new object: encoded afresh, never served stale bytes.
    d = msgspec.structs.replace(c, seq=3)
    assert cache.get(d) == encode(d)


class Counter(PolledCollector):
    name = "counter"

    def __init__(self) -> None:
        self.n = 0

    def collect(self) -> Sequence[object]:
        self.n += 1
        return [TemperatureReading(sensor="c", label="counter", temp_c=float(self.n))]


async def test_latest_and_journal_share_one_encoding(tmp_path: Path) -> None:
    config = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path), interval_s=0.02, state_dir=str(tmp_path)),
                         journal=JournalSection(enabled=True))
    agent = Agent(config, collectors={"counter": Counter()})
    transport = httpx.ASGITransport(app=agent.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        agent.start()
        try:
            for _ in range(1000):
                if agent.buffer is not None and agent.buffer.latest is not None and agent.buffer.latest.seq >= 3:
                    break
                await asyncio.sleep(0.01)
        finally:
            # Stopping writes every queued frame to the journal, the newest included.
            await agent.stop()
        assert agent.buffer is not None and agent.buffer.latest is not None
        latest = agent.buffer.latest
        hits = ENCODED.hits
        body = (await client.get("/v1/latest")).content
    assert body == encode(latest)
    assert ENCODED.hits == hits + 1  # the journal's encoding, not a second one
