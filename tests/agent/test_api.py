"""The agent's HTTP API, in process through ASGITransport and over loopback with uvicorn."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import httpx
import pytest

from rigmon.agent.agent import Agent
from rigmon.agent.frame_json import ENCODED, frame_json
from rigmon.agent.server import make_server
from rigmon.collectors.base import PolledCollector
from rigmon.config import AgentConfig, AgentSection
from rigmon.schema import Frame, Gap, Info, TemperatureReading, decode
from tests.agent.helpers import listening_port
from tests.agent.sse import SseEvent, read_events

TOKEN = "s3cret-token"


class Counter(PolledCollector):
    name = "counter"

    def __init__(self) -> None:
        self.n = 0

    def collect(self) -> Sequence[object]:
        self.n += 1
        return [TemperatureReading(sensor="c", label="counter", temp_c=float(self.n))]


def make_agent(tmp_path: Path, token: str | None = None, buffer_frames: int = 100, interval_s: float = 0.02,
               max_streams: int = 4) -> Agent:
    config = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path), interval_s=interval_s,
                                            buffer_frames=buffer_frames, max_streams=max_streams))
    return Agent(config, token=token, collectors={"counter": Counter()})


async def wait_for_seq(agent: Agent, seq: int) -> None:
    for _ in range(2000):
        if agent.buffer and agent.buffer.latest and agent.buffer.latest.seq >= seq:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"seq {seq} never reached")


@pytest.fixture
async def inproc(tmp_path: Path) -> AsyncIterator[tuple[Agent, httpx.AsyncClient]]:
    agent = make_agent(tmp_path)
    transport = httpx.ASGITransport(app=agent.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        yield agent, client
    await agent.stop()


async def test_latest_is_503_before_the_first_frame(inproc: tuple[Agent, httpx.AsyncClient]) -> None:
    agent, client = inproc
    r = await client.get("/v1/latest")
    assert r.status_code == 503
    assert "no frame" in r.json()["error"]


async def test_info_latest_and_samples(inproc: tuple[Agent, httpx.AsyncClient]) -> None:
    agent, client = inproc
    agent.start()
    await wait_for_seq(agent, 5)
    info = decode(Info, (await client.get("/v1/info")).content)
    assert info.node == "t1" and info.collectors == ("counter",)
    latest = decode(Frame, (await client.get("/v1/latest")).content)
    assert latest.run_id == info.run_id and latest.seq >= 5
    body = (await client.get("/v1/samples", params={"since": 2, "limit": 2})).json()
    assert [f["seq"] for f in body["frames"]] == [3, 4]
    assert body["gap"] is None and body["more"] is True
    assert (await client.get("/healthz")).json() == {"ok": True}


async def test_samples_splice_each_frames_cached_wire_json(inproc: tuple[Agent, httpx.AsyncClient]) -> None:
    agent, client = inproc
    agent.start()
    await wait_for_seq(agent, 4)
    assert agent.buffer is not None
    frames = agent.buffer.since(1, 2)
    looked_up = ENCODED.hits + ENCODED.misses
    raw = (await client.get("/v1/samples", params={"since": 1, "limit": 2})).content
    # Each frame's JSON is the one /v1/latest, SSE and the journal share, not a second encoding.
    assert ENCODED.hits + ENCODED.misses >= looked_up + 2
    body = json.loads(raw)
    assert [f["seq"] for f in body["frames"]] == [2, 3] and body["gap"] is None and body["more"] is True
    for frame in frames:
        assert frame_json(frame) in raw


@pytest.mark.parametrize("query", ["since=abc", "since=-1", "limit=0", "limit=x", "since=1.5",
                                   # Python's int takes these; a client that writes them is confused.
                                   "since=%EF%BC%91", "since=%2B5", "since=1_000", "since=%205", "limit=1e3"])
async def test_bad_query_parameters_are_400(inproc: tuple[Agent, httpx.AsyncClient], query: str) -> None:
    _, client = inproc
    r = await client.get(f"/v1/samples?{query}")
    assert r.status_code == 400
    assert r.json()["error"]


@pytest.mark.parametrize(("path", "query"), [("/v1/samples", {"since": "9" * 5000}),
                                             ("/v1/samples", {"view": "x" * 20000}),
                                             ("/v1/stream", {"view": "y" * 20000})])
async def test_a_refused_value_is_not_echoed_whole(inproc: tuple[Agent, httpx.AsyncClient], path: str,
                                                   query: dict[str, str]) -> None:
    _, client = inproc
    r = await client.get(path, params=query)
    assert r.status_code == 400
    error = r.json()["error"]
    assert len(error) < 200 and "characters)" in error, error


async def test_bad_last_event_id_is_400(inproc: tuple[Agent, httpx.AsyncClient]) -> None:
    _, client = inproc
    r = await client.get("/v1/stream", headers={"Last-Event-ID": "yesterday"})
    assert r.status_code == 400


async def test_samples_from_an_evicted_seq_report_a_gap(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, buffer_frames=5)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=agent.app()), base_url="http://a") as client:
        agent.start()
        await wait_for_seq(agent, 12)
        body = (await client.get("/v1/samples", params={"since": 1})).json()
        oldest = body["frames"][0]["seq"]
        assert body["gap"]["from_seq"] == 2 and body["gap"]["to_seq"] == oldest - 1
        other_run = (await client.get("/v1/samples", params={"since": 3, "run_id": "earlier"})).json()
        assert other_run["gap"]["reason"] == "agent restarted"
        await agent.stop()


async def test_oversized_request_is_refused(inproc: tuple[Agent, httpx.AsyncClient]) -> None:
    _, client = inproc
    r = await client.post("/v1/info", content=b"x" * 100_000)
    assert r.status_code == 413


async def test_auth(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, token=TOKEN)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=agent.app()), base_url="http://a") as client:
        assert (await client.get("/v1/info")).status_code == 401
        wrong = await client.get("/v1/info", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"].startswith("Bearer")
        assert (await client.get("/v1/info", headers={"Authorization": TOKEN})).status_code == 401
        ok = await client.get("/v1/info", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200
        assert (await client.get("/healthz")).status_code == 200
    await agent.stop()


# --- over loopback: streaming ---------------------------------------------------------


@pytest.fixture
async def served(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[Agent, str]]:
    params = getattr(request, "param", {})
    agent = make_agent(tmp_path, **params)
    server = make_server(agent, "127.0.0.1", 0)
    agent.start()
    task = asyncio.create_task(server.serve())
    port = await listening_port(server)
    yield agent, f"http://127.0.0.1:{port}"
    server.should_exit = True
    await agent.stop()
    await asyncio.wait_for(task, 10)


async def take(client: httpx.AsyncClient, url: str, n: int, headers: dict[str, str] | None = None) -> list[SseEvent]:
    out: list[SseEvent] = []
    async with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async for event in read_events(response):
            out.append(event)
            if len(out) >= n:
                break
    return out


async def test_stream_frames_have_increasing_seq_ids(served: tuple[Agent, str]) -> None:
    _, url = served
    async with httpx.AsyncClient(timeout=10) as client:
        events = await take(client, f"{url}/v1/stream", 5)
    seqs = [int(e.id or 0) for e in events]
    assert all(e.event == "frame" for e in events)
    assert seqs == list(range(seqs[0], seqs[0] + 5))
    assert [decode(Frame, e.data).seq for e in events] == seqs


async def test_resumed_stream_loses_nothing(served: tuple[Agent, str]) -> None:
    agent, url = served
    async with httpx.AsyncClient(timeout=10) as client:
        first = await take(client, f"{url}/v1/stream", 3)
        last = int(first[-1].id or 0)
        await wait_for_seq(agent, last + 10)  # frames pass while we are away
        resumed = await take(client, f"{url}/v1/stream", 10, headers={"Last-Event-ID": str(last)})
    assert [int(e.id or 0) for e in resumed] == list(range(last + 1, last + 11))
    readings = [decode(Frame, e.data).readings.temperatures[0].temp_c for e in first + resumed]
    assert readings == sorted(readings)


@pytest.mark.parametrize("served", [{"buffer_frames": 5}], indirect=True)
async def test_resume_beyond_the_buffer_sends_a_gap_event(served: tuple[Agent, str]) -> None:
    agent, url = served
    async with httpx.AsyncClient(timeout=10) as client:
        first = await take(client, f"{url}/v1/stream", 1)
        last = int(first[0].id or 0)
        await wait_for_seq(agent, last + 20)
        resumed = await take(client, f"{url}/v1/stream", 2, headers={"Last-Event-ID": str(last)})
    assert resumed[0].event == "gap"
    gap = decode(Gap, resumed[0].data)
    assert gap.from_seq == last + 1
    assert resumed[1].event == "frame" and int(resumed[1].id or 0) == gap.to_seq + 1


@pytest.mark.parametrize("served", [{"max_streams": 2}], indirect=True)
async def test_stream_count_is_limited(served: tuple[Agent, str]) -> None:
    _, url = served
    async with httpx.AsyncClient(timeout=10) as client:
        async with client.stream("GET", f"{url}/v1/stream") as s1, client.stream("GET", f"{url}/v1/stream") as s2:
            assert s1.status_code == s2.status_code == 200
            third = await client.get(f"{url}/v1/stream")
            assert third.status_code == 503
            assert "too many" in json.loads(third.content)["error"]


async def test_latest_is_answered_without_starlette_as_the_route_answers_it(
        inproc: tuple[Agent, httpx.AsyncClient], monkeypatch: pytest.MonkeyPatch) -> None:
    """GET /v1/latest, pulled every second, skips Starlette's middleware and routing; its
    answer is the route's: same status, headers and bytes."""
    from starlette.applications import Starlette

    agent, client = inproc
    agent.start()
    await wait_for_seq(agent, 2)
    agent.sampler.stop()
    await asyncio.sleep(0.1)
    assert agent.buffer is not None and agent.buffer.latest is not None
    frame = agent.buffer.latest
    through_route = await client.head("/v1/latest")  # HEAD still takes the route
    entered: list[str] = []
    original = Starlette.__call__

    async def counting(self: Starlette, scope: dict[str, object], receive: object, send: object) -> None:
        entered.append(str(scope.get("path")))
        await original(self, scope, receive, send)  # type: ignore[arg-type]

    monkeypatch.setattr(Starlette, "__call__", counting)
    fast = await client.get("/v1/latest")
    assert entered == []
    assert fast.status_code == through_route.status_code == 200
    assert fast.content == frame_json(frame)
    assert list(fast.headers.items()) == list(through_route.headers.items())
    assert (await client.get("/v1/info")).status_code == 200 and entered == ["/v1/info"]


async def test_latest_still_needs_the_token(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, token=TOKEN)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=agent.app()), base_url="http://a") as client:
        agent.start()
        await wait_for_seq(agent, 1)
        assert (await client.get("/v1/latest")).status_code == 401
        ok = await client.get("/v1/latest", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200 and decode(Frame, ok.content).node == "t1"
    await agent.stop()


class Bulky(PolledCollector):
    """Frames of ~60 kB (an 8-GPU node's are ~30 kB)."""

    name = "bulky"

    def collect(self) -> Sequence[object]:
        return [TemperatureReading(sensor=f"s{i}", label="x" * 40, temp_c=float(i)) for i in range(600)]


@pytest.mark.parametrize("view", ["full", "summary"])
async def test_a_client_that_does_not_read_a_long_backfill_holds_a_piece_of_it_not_all(
        tmp_path: Path, view: str) -> None:
    """/v1/samples built its whole answer (up to 1000 frames: ~30 MB on an 8-GPU node) and handed it to
    the connection at once: 16 connections of one client that never read held 16 of them, past the
    agent's 512 MB memory cap. Now it goes out in pieces as the client takes them, and reads the same."""
    import socket

    config = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path), interval_s=0.01, buffer_frames=200))
    agent = Agent(config, collectors={"bulky": Bulky()})
    server = make_server(agent, "127.0.0.1", 0)
    agent.start()
    serving = asyncio.create_task(server.serve())
    try:
        port = await listening_port(server)
        await wait_for_seq(agent, 200)
        agent.sampler.stop()
        assert agent.buffer is not None and agent.buffer.latest is not None
        last = agent.buffer.latest.seq
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", port))
            sock.sendall(f"GET /v1/samples?since=0&view={view} HTTP/1.1\r\nHost: agent\r\n\r\n".encode())
            held = 0
            for _ in range(50):  # the answer's state after the agent has written what it could
                await asyncio.sleep(0.02)
                opened = server.config.http.limits.open  # type: ignore[attr-defined]
                held = max([held, *(c.transport.get_write_buffer_size() for c in opened)])
            assert held < 1024 * 1024, f"{held} bytes of the answer wait in the agent for a client that does not read"
            sock.setblocking(False)
            received: list[bytes] = []
            last_bytes = b""
            while not last_bytes.endswith(b"\r\n0\r\n\r\n"):  # the end of a chunked answer
                try:
                    chunk = sock.recv(1 << 20)
                except BlockingIOError:
                    await asyncio.sleep(0.005)
                    continue
                assert chunk, "closed before the end of the answer"
                received.append(chunk)
                last_bytes = (last_bytes + chunk)[-7:]
        raw = memoryview(b"".join(received))
        raw = raw[bytes(raw).index(b"\r\n\r\n") + 4:]
        pieces: list[bytes] = []
        while True:  # de-chunk
            end = bytes(raw[:20]).index(b"\r\n")
            size = int(bytes(raw[:end]), 16)
            if size == 0:
                break
            pieces.append(bytes(raw[end + 2:end + 2 + size]))
            raw = raw[end + 4 + size:]
        body = b"".join(pieces)
        answer = json.loads(body)
        listed = answer["summaries"] if view == "summary" else answer["frames"]
        seqs = [(s["frame"] if view == "summary" else s)["seq"] for s in listed]
        assert seqs == list(range(last - len(seqs) + 1, last + 1)) and len(seqs) >= 150
        assert answer["more"] is False
    finally:
        server.should_exit = True
        await agent.stop()
        await asyncio.wait_for(serving, 10)
