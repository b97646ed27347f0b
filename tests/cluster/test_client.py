"""AgentClient against httpx.MockTransport: failures become reasons, streams resume, back-off grows."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest

from rigmon.cluster.client import AgentClient, Backoff, Connected, Failed, GapReported, Sampled, Update
from tests.tui.snapshot_apps.fake_agent import FakeAgent, other_schema


class RecordingSleep:
    """Records the delays the client asks for and yields to the loop instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


def client_for(transport: httpx.AsyncBaseTransport, sleep: RecordingSleep | None = None, **kw: object) -> AgentClient:
    return AgentClient("http://node.test:9871", transport=transport, sleep=sleep or RecordingSleep(), **kw)  # type: ignore[arg-type]


async def take(client: AgentClient, count: int, until: Callable[[Update], bool] | None = None) -> list[Update]:
    """The first ``count`` updates (or up to the first matching ``until``), bounded in time."""
    out: list[Update] = []

    async def run() -> None:
        async for update in client.follow():
            out.append(update)
            if len(out) >= count or (until is not None and until(update)):
                return

    await asyncio.wait_for(run(), 10)
    return out


def raising(exc_type: type[Exception], message: str = "boom") -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc_type(message, request=request)  # type: ignore[call-arg]
    return httpx.MockTransport(handler)


@pytest.mark.parametrize(
    ("transport", "reason"),
    [
        (raising(httpx.ConnectError, "[Errno 111] Connection refused"), "cannot connect: connection refused"),
        (raising(httpx.ConnectTimeout), "connect timed out"),
        (raising(httpx.ReadTimeout), "timed out waiting for data"),
        (httpx.MockTransport(lambda r: httpx.Response(500, json={"error": "sampler crashed"})),
         "HTTP 500: sampler crashed"),
        (httpx.MockTransport(lambda r: httpx.Response(502, text="<html>bad gateway</html>")), "HTTP 502: Bad Gateway"),
        (httpx.MockTransport(lambda r: httpx.Response(401, json={"error": "missing or wrong bearer token"})),
         "401 unauthorized: missing or wrong bearer token"),
        (httpx.MockTransport(lambda r: httpx.Response(200, text="<html>hello</html>")), "bad answer: not JSON"),
        (httpx.MockTransport(lambda r: httpx.Response(200, json={"schema": 2, "node": "x"})),
         "bad answer: schema version 2, this client speaks 1"),
        (httpx.MockTransport(lambda r: httpx.Response(200, json={"schema": 1, "node": 3})), "bad answer: bad Info"),
    ],
    ids=["refused", "connect-timeout", "read-timeout", "5xx-json", "5xx-html", "401", "bad-json",
         "schema-mismatch", "bad-shape"],
)
async def test_failures_become_reasons(transport: httpx.MockTransport, reason: str) -> None:
    sleep = RecordingSleep()
    updates = await take(client_for(transport, sleep, backoff=Backoff(0.5, 4.0)), 5)
    assert all(isinstance(u, Failed) for u in updates)
    assert updates[0].reason.startswith(reason)  # type: ignore[union-attr]
    assert [u.retry_in_s for u in updates] == [0.5, 1.0, 2.0, 4.0, 4.0]  # type: ignore[union-attr]
    assert sleep.delays == [0.5, 1.0, 2.0, 4.0]


async def test_backfills_then_streams() -> None:
    agent = FakeAgent("node01", frames=300)
    client = client_for(agent.transport, backfill_frames=120)
    updates = await take(client, 2)
    assert isinstance(updates[0], Connected) and updates[0].info.node == "node01"
    assert isinstance(updates[1], Sampled)
    assert [f.seq for f in updates[1].frames] == list(range(181, 301))
    agent.publish(2)
    more = []
    async for update in client.follow():  # the same client resumes where it was
        if isinstance(update, Sampled):
            more.extend(f.seq for f in update.frames)
        if len(more) >= 2:
            break
    assert more == [301, 302]


async def test_stream_frame_of_another_schema_is_a_failure() -> None:
    agent = FakeAgent("node01", frames=3)
    client = client_for(agent.transport, backfill_frames=0)
    seen: list[Update] = []

    async def run() -> None:
        async for update in client.follow():
            seen.append(update)
            if isinstance(update, Sampled):
                agent.body = other_schema(agent.frames[-1])
                agent.drop_streams()
            if isinstance(update, Failed):
                return

    await asyncio.wait_for(run(), 10)
    assert isinstance(seen[-1], Failed) and "schema version 2" in seen[-1].reason


async def test_resume_sends_last_event_id_and_run_id() -> None:
    agent = FakeAgent("node01", frames=5)
    client = client_for(agent.transport, backfill_frames=10, backoff=Backoff(0.01, 0.01))
    seqs: list[int] = []

    async def run() -> None:
        async for update in client.follow():
            if isinstance(update, Sampled):
                seqs.extend(f.seq for f in update.frames)
                if seqs[-1] == 5:
                    # The connection breaks; the agent samples on meanwhile.
                    agent.down = True
                    agent.drop_streams()
                    agent.publish(4)
                if seqs[-1] == 9:
                    return
            if isinstance(update, Failed):
                agent.down = False

    await asyncio.wait_for(run(), 10)
    assert seqs == list(range(1, 10))
    streams = [r for r in agent.requests if r.url.path == "/v1/stream"]
    assert streams[-1].headers["last-event-id"] == "5"
    assert streams[-1].url.params["run_id"] == "node01-run1"


async def test_restarted_agent_is_followed_from_its_new_run() -> None:
    agent = FakeAgent("node01", frames=5)
    client = client_for(agent.transport, backoff=Backoff(0.01, 0.01))
    runs: list[tuple[str, int]] = []

    async def run() -> None:
        async for update in client.follow():
            if isinstance(update, Sampled):
                runs.extend((f.run_id, f.seq) for f in update.frames)
                if runs[-1] == ("node01-run1", 5):
                    agent.restart()
                    agent.publish(3)
                if runs[-1][0] == "node01-run2" and runs[-1][1] == 3:
                    return

    await asyncio.wait_for(run(), 10)
    assert runs[-3:] == [("node01-run2", 1), ("node01-run2", 2), ("node01-run2", 3)]


async def test_falls_back_to_polling_when_streams_are_refused() -> None:
    agent = FakeAgent("node01", frames=3)

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/stream":
            return httpx.Response(503, json={"error": "too many open streams (limit 32)"})
        return await agent.handle(request)

    sleep = RecordingSleep()
    client = client_for(httpx.MockTransport(handler), sleep, backfill_frames=0)
    seqs: list[int] = []

    async def run() -> None:
        async for update in client.follow():
            if isinstance(update, Sampled):
                seqs.extend(f.seq for f in update.frames)
                if seqs[-1] == 3:
                    agent.publish(2)
                if seqs[-1] == 5:
                    return

    await asyncio.wait_for(run(), 10)
    assert seqs[-2:] == [4, 5]
    polls = [r for r in agent.requests if r.url.path == "/v1/samples"]
    assert polls and polls[-1].url.params["since"] == "3"


async def test_gap_is_reported() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/stream":
            body = b'event: gap\ndata: {"run_id":"r","from_seq":1,"to_seq":4,"reason":"agent restarted"}\n\n'
            return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
        return await FakeAgent("n").handle(request)

    updates = await take(client_for(httpx.MockTransport(handler)), 10, until=lambda u: isinstance(u, GapReported))
    gap = updates[-1]
    assert isinstance(gap, GapReported) and (gap.gap.from_seq, gap.gap.to_seq) == (1, 4)
