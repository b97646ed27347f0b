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
