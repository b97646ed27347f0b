"""The agent's summary view: /v1/stream?view=summary and /v1/samples?view=summary."""

from __future__ import annotations

import json

import httpx
import pytest

from rigmon.agent.agent import Agent
from rigmon.schema import Frame, Gap, decode
from rigmon.summary import SummaryRecord, summarize
from tests.agent.test_api import inproc, served, take, wait_for_seq  # noqa: F401 - fixtures

__all__ = ["inproc", "served"]


async def test_summary_stream_sends_a_record_per_frame_with_the_frames_seq(served: tuple[Agent, str]) -> None:
    agent, url = served
    async with httpx.AsyncClient(timeout=10) as client:
        events = await take(client, f"{url}/v1/stream?view=summary", 5)
    assert all(e.event == "summary" for e in events)
    seqs = [int(e.id or 0) for e in events]
    assert seqs == list(range(seqs[0], seqs[0] + 5))
    records = [decode(SummaryRecord, e.data) for e in events]
    assert [r.frame.seq for r in records] == [r.summary.seq for r in records] == seqs
    assert all(r.frame.node == r.summary.node == "t1" for r in records)
    # The slim frame keeps the collectors' states and leaves out the bulky readings.
    assert all(r.frame.collectors["counter"].state == "ok" for r in records)
    assert all(r.frame.readings.temperatures == () for r in records)
    # The agent's summary is what the dashboard computes from the whole frame.
    assert agent.buffer is not None
    whole = {f.seq: f for f in agent.buffer.since(seqs[0] - 1, 5)}
    assert sorted(whole) == seqs
    assert [r.summary for r in records] == [summarize(whole[seq]) for seq in seqs]


async def test_full_stream_is_unchanged_by_default(served: tuple[Agent, str]) -> None:
    _, url = served
    async with httpx.AsyncClient(timeout=10) as client:
        events = await take(client, f"{url}/v1/stream?view=full", 2) + await take(client, f"{url}/v1/stream", 2)
    assert all(e.event == "frame" for e in events)
    assert all(decode(Frame, e.data).readings.temperatures for e in events)


async def test_resumed_summary_stream_loses_nothing(served: tuple[Agent, str]) -> None:
    agent, url = served
    async with httpx.AsyncClient(timeout=10) as client:
        first = await take(client, f"{url}/v1/stream?view=summary", 3)
        last = int(first[-1].id or 0)
        await wait_for_seq(agent, last + 10)
        resumed = await take(client, f"{url}/v1/stream?view=summary", 10, headers={"Last-Event-ID": str(last)})
    assert [int(e.id or 0) for e in resumed] == list(range(last + 1, last + 11))
    assert [decode(SummaryRecord, e.data).frame.seq for e in resumed] == list(range(last + 1, last + 11))


@pytest.mark.parametrize("served", [{"buffer_frames": 5}], indirect=True)
async def test_summary_stream_resumed_beyond_the_buffer_sends_a_gap(served: tuple[Agent, str]) -> None:
    agent, url = served
    async with httpx.AsyncClient(timeout=10) as client:
        first = await take(client, f"{url}/v1/stream?view=summary", 1)
        last = int(first[0].id or 0)
        await wait_for_seq(agent, last + 20)
        resumed = await take(client, f"{url}/v1/stream?view=summary", 2, headers={"Last-Event-ID": str(last)})
    assert resumed[0].event == "gap"
    gap = decode(Gap, resumed[0].data)
    assert gap.from_seq == last + 1
    assert resumed[1].event == "summary" and int(resumed[1].id or 0) == gap.to_seq + 1


async def test_unknown_view_is_400(inproc: tuple[Agent, httpx.AsyncClient]) -> None:
    _, client = inproc
    for path in ("/v1/stream", "/v1/samples"):
        r = await client.get(path, params={"view": "tiny"})
        assert r.status_code == 400
        assert "view" in r.json()["error"]


async def test_samples_in_the_summary_view(inproc: tuple[Agent, httpx.AsyncClient]) -> None:
    agent, client = inproc
    agent.start()
    await wait_for_seq(agent, 4)
    body = (await client.get("/v1/samples", params={"since": 1, "view": "summary"})).json()
    assert body["frames"] == []
    records = [decode(SummaryRecord, json.dumps(item)) for item in body["summaries"]]
    assert [r.frame.seq for r in records][:3] == [2, 3, 4]
    assert "summaries" not in (await client.get("/v1/samples", params={"since": 1})).json()
