"""AgentClient against hostile or broken peers on 127.0.0.1 (extends test_client_live.py's
garbage cases): oversized answers, an endless stream line, a trickle that never ends, a wrong
token. The client reports each as a reason and keeps retrying; it never buffers without bound."""

from __future__ import annotations

import asyncio
import contextlib
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable

from rigmon.cluster.client import AgentClient, Backoff, Failed
from tests.cluster.test_client_live import agent_with_token

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
CHUNK = b"x" * 65536


@contextlib.asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    async def guarded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            await handler(reader, writer)
        writer.close()

    server = await asyncio.start_server(guarded, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


async def first_failure(client: AgentClient) -> str:
    async def run() -> str:
        async for update in client.follow():
            if isinstance(update, Failed):
                return update.reason
        raise AssertionError("follow ended")

    try:
        return await asyncio.wait_for(run(), 20)
    finally:
        await client.aclose()


async def endless_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    while True:
        writer.write(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
        await writer.drain()


async def test_oversized_answer_is_refused_without_buffering_it() -> None:
    async with serving(endless_body) as url:
        tracemalloc.start()
        try:
            reason = await first_failure(AgentClient(url, backoff=Backoff(0.01, 0.01), max_answer_bytes=8 << 20))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert reason == "answer larger than 8 MB"
    assert peak < 64 << 20


async def test_a_trickle_that_never_ends_hits_the_deadline() -> None:
    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{")
        while True:
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.write(b" ")

    async with serving(trickle) as url:
        client = AgentClient(url, backoff=Backoff(0.01, 0.01), request_timeout_s=1.0, request_deadline_s=0.5)
        assert await first_failure(client) == "answer took longer than 0.5 s"


async def test_endless_stream_line_is_cut_off() -> None:
    info = (b'{"schema":1,"node":"n","run_id":"r","agent_version":"0","agent_start":1.0,'
            b'"interval_s":1.0,"collectors":[]}')

    async def agent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.read(0)  # the request line was read by `serving`
        del head
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Type: application/json\r\n\r\n%s"
                     % (len(info), info))
        await writer.drain()

    calls: list[str] = []

    async def router(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        calls.append("x")
        if len(calls) == 1:
            await agent(reader, writer)
        elif len(calls) == 2:  # /v1/latest: nothing sampled yet
            writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\n\r\n{}")
            await writer.drain()
        else:  # /v1/stream: "data: xxxxx..." without end
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            writer.write(b"%x\r\ndata: \r\n" % 6)
            while True:
                writer.write(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
                await writer.drain()

    async with serving(router) as url:
        assert await first_failure(AgentClient(url, backoff=Backoff(0.01, 0.01))) == \
            "event stream line longer than 16 MB"


async def test_huge_error_body_is_not_read_whole() -> None:
    async def refusing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n")
        while True:
            writer.write(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
            await writer.drain()

    async with serving(refusing) as url:
        reason = await first_failure(AgentClient(url, backoff=Backoff(0.01, 0.01), max_answer_bytes=1 << 20))
    assert reason == "answer larger than 1 MB"


async def test_wrong_token_is_a_clear_401() -> None:
    async with agent_with_token("right") as url:
        reason = await first_failure(AgentClient(url, "wrong", backoff=Backoff(0.01, 0.01)))
    assert reason == "401 unauthorized: missing or wrong bearer token"
