"""A stream the agent ends cleanly (it stops, or ends its streams on a reload) is opened again at once, not
after half a second of a stale row; an agent that ends every stream at once is retried with back-off.

No clock: the client's sleeps are recorded (`RecordingSleep`), and what is asserted is the delays it asked for.
"""

from __future__ import annotations

import httpx

from rigmon.cluster.client import Backoff, Connected, Sampled, Update
from rigmon.schema import encode
from tests.cluster.test_client import RecordingSleep, client_for, take
from tests.tui.snapshot_apps.fake_agent import FakeAgent


def streams_of(agent: FakeAgent, per_stream: int) -> httpx.MockTransport:
    """``agent``, whose every stream sends ``per_stream`` new frames and then ends cleanly (0: ends at once)."""

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path != "/v1/stream":
            return await agent.handle(request)
        agent.requests.append(request)
        agent.publish(per_stream)
        fresh = agent.frames[len(agent.frames) - per_stream:] if per_stream else []
        body = b"".join(f"id: {f.seq}\nevent: frame\ndata: ".encode() + encode(f) + b"\n\n" for f in fresh)
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    return httpx.MockTransport(handler)


def streams_opened(agent: FakeAgent) -> int:
    return sum(1 for r in agent.requests if r.url.path == "/v1/stream")


async def test_a_stream_ended_after_new_frames_is_opened_again_at_once() -> None:
    agent = FakeAgent("node01", frames=1)
    sleep = RecordingSleep()
    client = client_for(streams_of(agent, per_stream=1), sleep, backfill_frames=0, backoff=Backoff(0.5, 4.0))
    updates = await take(client, 100, until=lambda u: isinstance(u, Connected) and streams_opened(agent) >= 3)
    seqs = [f.seq for u in updates if isinstance(u, Sampled) for f in u.frames]
    assert seqs == [2, 3, 4] and streams_opened(agent) == 3
    # Three clean closes, each after a new frame: none waited.
    assert sleep.delays == []


async def test_an_agent_that_ends_every_stream_at_once_is_retried_with_back_off() -> None:
    agent = FakeAgent("node01", frames=1)
    sleep = RecordingSleep()
    client = client_for(streams_of(agent, per_stream=0), sleep, backfill_frames=0, backoff=Backoff(0.5, 4.0))
    connected: list[Update] = await take(client, 7)
    assert all(isinstance(u, Connected) for u in connected) and streams_opened(agent) == 6
    # The first close is followed at once; each further one, with nothing new in between, backs off
    # (doubling, up to the back-off's longest delay).
    assert sleep.delays == [0.5, 1.0, 2.0, 4.0, 4.0]


async def test_new_frames_end_the_back_off_of_closed_streams() -> None:
    agent = FakeAgent("node01", frames=1)
    sleep = RecordingSleep()
    per_stream = [0, 0, 0, 1, 0, 0]

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/stream":
            count = per_stream[min(streams_opened(agent), len(per_stream) - 1)]
            return await streams_of(agent, count).handle_async_request(request)
        return await agent.handle(request)

    client = client_for(httpx.MockTransport(handler), sleep, backfill_frames=0, backoff=Backoff(0.5, 4.0))
    await take(client, 100, until=lambda u: isinstance(u, Connected) and streams_opened(agent) >= 5)
    # Closes 1-3 without data: at once, 0.5, 1.0; the fourth stream brought a frame, so its close is
    # followed at once, and the next close without data starts the back-off afresh.
    assert sleep.delays == [0.5, 1.0, 0.5]
