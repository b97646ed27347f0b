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
from tests.agent.helpers import listening_port


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

    from rigmon.agent import lingering
    from rigmon.agent.lingering import LingeringTransport

    monkeypatch.setattr(lingering, "LINGER_S", 0.01)
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
        await listening_port(server)
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


@pytest.mark.parametrize("parser", ["httptools", "h11"])
async def test_malformed_and_upgrade_requests_are_counted_not_logged_one_line_each(
        tmp_path: Path, parser: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Anyone who reaches the port wrote a warning line per malformed request (two, with uvicorn's advice to
    install a WebSocket library, per upgrade request): a log flood, which under systemd uses up journald's
    rate limit and drops the agent's own lines. And the 400 was plain text where every answer is JSON."""
    import asyncio
    import json
    import logging

    if parser == "h11":
        monkeypatch.setattr(connections, "httptools_available", lambda: False)
    agent = Agent(AgentConfig(agent=AgentSection(node="p", root=str(tmp_path))), collectors={})
    server = make_server(agent, "127.0.0.1", 0)
    serving = asyncio.create_task(server.serve())

    async def exchange(raw: bytes, until: bytes | None = None) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(raw)
        await writer.drain()
        # An answer that closes is read to its end; a kept-alive one up to ``until``.
        answer = await asyncio.wait_for(reader.read() if until is None else reader.readuntil(until), 10)
        writer.close()
        return answer

    try:
        port = await listening_port(server)
        caplog.set_level(logging.WARNING)
        for _ in range(20):
            answer = await exchange(b"GET /v1/\xff\xfe HTTP/1.1\r\nHost: agent\r\n\r\n")
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 400 ") and b"application/json" in head
            assert "malformed" in json.loads(body)["error"]
            answer = await exchange(b"GET /healthz HTTP/1.1\r\nHost: agent\r\nConnection: Upgrade\r\n"
                                    b"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                                    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", until=b"}")
            assert answer.startswith(b"HTTP/1.1 200 ")
        assert server.config.http.limits.client_faults == 40  # type: ignore[attr-defined]
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1 and "from 127.0.0.1" in warnings[0], warnings
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 10)
