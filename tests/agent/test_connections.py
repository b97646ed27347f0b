"""The agent's HTTP protocol: httptools (C parser) when installed, h11 otherwise, each with the connection guard."""

from __future__ import annotations

from pathlib import Path

import pytest
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from rigmon.agent import connections
from rigmon.agent.agent import Agent
from rigmon.agent.connections import ConnectionLimits, GuardedConnection, guarded_protocol
from rigmon.agent.server import make_server
from rigmon.config import AgentConfig, AgentSection


def limits() -> ConnectionLimits:
    return ConnectionLimits(head_timeout_s=5.0, max_per_client=4, max_total=8)


def test_the_agent_serves_with_httptools_when_it_is_installed(tmp_path: Path) -> None:
    agent = Agent(AgentConfig(agent=AgentSection(node="p", root=str(tmp_path))), collectors={})
    protocol = make_server(agent, "127.0.0.1", 0).config.http
    assert isinstance(protocol, type)
    assert issubclass(protocol, GuardedConnection) and issubclass(protocol, HttpToolsProtocol)


def test_h11_is_the_fallback_without_httptools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connections, "httptools_available", lambda: False)
    protocol = guarded_protocol(limits())
    assert issubclass(protocol, GuardedConnection) and issubclass(protocol, H11Protocol)
    with pytest.raises(ValueError, match="not installed"):
        guarded_protocol(limits(), "httptools")


def test_each_server_gets_its_own_limits() -> None:
    first, second = limits(), limits()
    assert guarded_protocol(first).limits is first
    assert guarded_protocol(second).limits is second
    assert guarded_protocol(first, "h11").limits is first


def test_an_unknown_parser_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown HTTP parser"):
        guarded_protocol(limits(), "picohttp")


class FakeTransport:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.closed = False

    def is_closing(self) -> bool:
        return self.closed

    def can_write_eof(self) -> bool:
        return True

    def close(self) -> None:
        self.calls.append("close")
        self.closed = True

    def write_eof(self) -> None:
        self.calls.append("write_eof")

    def resume_reading(self) -> None:
        self.calls.append("resume_reading")


class FakeProtocol:
    def __init__(self, pending: bool, loop: object) -> None:
        self.pending = pending
        self.loop = loop
        self.discarding = False

    def input_pending(self) -> bool:
        return self.pending

    def discard_input(self) -> None:
        self.discarding = True


async def test_a_connection_whose_request_was_read_whole_closes_without_lingering(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from rigmon.agent.connections import LingeringTransport

    monkeypatch.setattr(connections, "LINGER_S", 0.01)
    loop = asyncio.get_running_loop()
    done = FakeTransport()
    LingeringTransport(done, FakeProtocol(False, loop)).close()  # type: ignore[arg-type]
    assert done.calls == ["close"]
    # An answer sent before the request was read whole (413, 431, 503) lingers: half-close, read, close later.
    sending = FakeTransport()
    lingering = LingeringTransport(sending, FakeProtocol(True, loop))  # type: ignore[arg-type]
    lingering.close()
    assert sending.calls == ["write_eof", "resume_reading"]
    lingering.lost()  # the client closed its side: the timer is gone with the connection
    await asyncio.sleep(0.05)
    assert sending.calls == ["write_eof", "resume_reading"]
    unanswered = FakeTransport()
    LingeringTransport(unanswered, FakeProtocol(True, loop)).close()  # type: ignore[arg-type]
    await asyncio.sleep(0.05)
    assert unanswered.calls == ["write_eof", "resume_reading", "close"]


async def test_answers_go_out_at_once_on_the_socket_rigmon_agent_binds(tmp_path: Path) -> None:
    """`rigmon agent` binds its own listening socket (protocol 0), which asyncio does not mark as TCP:
    without TCP_NODELAY, each answer after the first on a kept-open connection waited for a delayed ACK."""
    import asyncio
    import socket

    agent = Agent(AgentConfig(agent=AgentSection(node="p", root=str(tmp_path))), collectors={})
    server = make_server(agent, "127.0.0.1", 0)
    listener = server.config.bind_socket()
    assert listener.proto == 0  # what asyncio's own nodelay rule skips
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n")
        await writer.drain()
        await reader.readuntil(b"\r\n\r\n")
        opened = server.config.http.limits.open  # type: ignore[attr-defined]
        assert len(opened) == 1
        accepted = opened[0].transport.get_extra_info("socket")
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        writer.close()
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 10)


def _normalised(answer: bytes) -> bytes:
    """An answer with its Date header's value blanked (the two answers compared may straddle a second)."""
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = [b"date: -" if line.lower().startswith(b"date:") else line for line in head.split(b"\r\n")]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


async def _read_answer(reader: object) -> bytes:
    import asyncio

    assert isinstance(reader, asyncio.StreamReader)
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
    return head + await reader.readexactly(length)


async def test_a_latest_pull_is_answered_without_a_task_and_with_the_same_bytes(tmp_path: Path) -> None:
    """The once-a-second pull is answered as its request is read (no task, no later turn of the
    loop); its bytes are those of the answer a task gives, pipelined pulls included."""
    import asyncio

    from tests.agent.test_api import make_agent, wait_for_seq

    agent = make_agent(tmp_path, token="t0ken")
    server = make_server(agent, "127.0.0.1", 0)
    listener = server.config.bind_socket()
    loop = asyncio.get_running_loop()
    started: list[str] = []
    factory = loop.get_task_factory()

    def counting(loop: asyncio.AbstractEventLoop, coro: object, **kwargs: object) -> asyncio.Task[object]:
        started.append(getattr(coro, "__qualname__", "?"))
        return asyncio.Task(coro, loop=loop, **kwargs)  # type: ignore[arg-type]

    serving = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        agent.start()
        await wait_for_seq(agent, 1)
        agent.sampler.stop()
        while not server.started:
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        pull = b"GET /v1/latest HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer t0ken\r\n\r\n"
        refused = b"GET /v1/latest HTTP/1.1\r\nHost: agent\r\n\r\n"
        loop.set_task_factory(counting)
        answers = []
        for request in (pull, refused, pull + pull):
            writer.write(request)
            await writer.drain()
            answers.append(await _read_answer(reader))
        answers.append(await _read_answer(reader))
        loop.set_task_factory(factory)
        assert not [name for name in started if "run_asgi" in name]
        # The same requests with the app's permission taken back: each answer from a task, as before.
        app = server.config.loaded_app
        app.starts_eagerly = lambda scope: False
        loop.set_task_factory(counting)
        through_task = []
        for request in (pull, refused, pull + pull):
            writer.write(request)
            await writer.drain()
            through_task.append(await _read_answer(reader))
        through_task.append(await _read_answer(reader))
        loop.set_task_factory(factory)
        assert len([name for name in started if "run_asgi" in name]) == 4
        assert [a.split(b"\r\n")[0] for a in answers] == [b"HTTP/1.1 200 OK", b"HTTP/1.1 401 Unauthorized",
                                                         b"HTTP/1.1 200 OK", b"HTTP/1.1 200 OK"]
        assert list(map(_normalised, answers)) == list(map(_normalised, through_task))
        writer.close()
    finally:
        loop.set_task_factory(factory)
        server.should_exit = True
        await asyncio.wait_for(serving, 10)
        await agent.stop()


async def test_a_request_run_at_once_that_must_wait_goes_on_as_a_task() -> None:
    """`resume`: what the first step outside a task awaited, then the rest of the coroutine, in a task
    (results, exceptions and cancellation as for the coroutine itself)."""
    import asyncio

    loop = asyncio.get_running_loop()

    async def waits(future: asyncio.Future[int]) -> int:
        return await future + 1

    future: asyncio.Future[int] = loop.create_future()
    run = waits(future)
    waiting = run.send(None)
    assert waiting is future
    task = loop.create_task(connections.resume(run, waiting))
    await asyncio.sleep(0)
    assert not task.done()
    future.set_result(41)
    assert await task == 42

    future = loop.create_future()
    run = waits(future)
    task = loop.create_task(connections.resume(run, run.send(None)))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert future.cancelled()
