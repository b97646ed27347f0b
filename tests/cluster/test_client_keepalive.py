"""A request that goes out on a kept-alive connection the agent is closing at that moment gets no
answer at all: the client asks once more on a new connection (a GET changes nothing), and says
so only when the agent fails again there."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import msgspec
import pytest

from rigmon.cluster.client import AgentClient, AgentError
from rigmon.schema import AlarmList


def alarm_list_bytes() -> bytes:
    return msgspec.json.encode(AlarmList(node="n1", active=(), recent=()))


@asynccontextmanager
async def agent_that_drops(first: int, *, after_head: bool = False) -> AsyncIterator[tuple[int, list[int]]]:
    """An HTTP server on 127.0.0.1 that closes its first ``first`` connections once it has read a
    request's head (with ``after_head``, once it has sent the answer's head), then answers
    ``/v1/alarms``; yields its port and how many requests each connection read."""
    seen: list[int] = []
    body = alarm_list_bytes()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = len(seen)
        seen.append(0)
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                seen[index] += 1
                head = (f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        f"content-length: {len(body)}\r\n\r\n").encode()
                if index < first:
                    if after_head:
                        writer.write(head + body[:5])
                        await writer.drain()
                    break  # closed: the kept-alive connection the server let go
                writer.write(head + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], seen
    finally:
        server.close()
        await server.wait_closed()


async def test_a_connection_closed_before_any_answer_is_asked_again_once() -> None:
    async with agent_that_drops(1) as (port, seen):
        client = AgentClient(f"http://127.0.0.1:{port}")
        try:
            answer = await client.alarms()
        finally:
            await client.aclose()
    assert answer.node == "n1" and seen == [1, 1]


async def test_an_agent_that_fails_again_is_reported_and_an_answer_cut_is_not_asked_again() -> None:
    async with agent_that_drops(2) as (port, seen):
        client = AgentClient(f"http://127.0.0.1:{port}")
        try:
            with pytest.raises(AgentError, match="connection lost|stopped the connection"):
                await client.alarms()
        finally:
            await client.aclose()
    assert seen == [1, 1]  # once more, not a third time
    # An answer that began and broke off may have been acted on: not asked again.
    async with agent_that_drops(1, after_head=True) as (port, seen):
        client = AgentClient(f"http://127.0.0.1:{port}")
        try:
            with pytest.raises(AgentError):
                await client.alarms()
        finally:
            await client.aclose()
    assert seen == [1]
