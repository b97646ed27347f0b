"""A client that speaks TLS to an agent serving plain HTTP is logged as that, not as "a malformed HTTP request"."""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path

import pytest

from rigmon.agent import connections
from rigmon.agent.agent import Agent
from rigmon.agent.server import make_server
from rigmon.config import AgentConfig, AgentSection
from tests.agent.helpers import listening_port


async def tls_hello(port: int) -> None:
    """What Prometheus with ``scheme: https`` (or ``curl https://``) does: a TLS handshake, refused."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, ssl=context), 10)
        writer.close()


@pytest.mark.parametrize("parser", ["httptools", "h11"])
async def test_a_tls_handshake_to_a_plain_http_agent_is_logged_as_one(
        tmp_path: Path, parser: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    if parser == "h11":
        monkeypatch.setattr(connections, "httptools_available", lambda: False)
    agent = Agent(AgentConfig(agent=AgentSection(node="p", root=str(tmp_path))), collectors={})
    server = make_server(agent, "127.0.0.1", 0)
    serving = asyncio.create_task(server.serve())
    try:
        port = await listening_port(server)
        caplog.set_level(logging.WARNING)
        await tls_hello(port)
        for _ in range(100):  # the server's side of the refusal runs on the loop after the client's
            if server.config.http.limits.client_faults:  # type: ignore[attr-defined]
                break
            await asyncio.sleep(0.02)
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 10)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("A TLS handshake (the client uses https://, Prometheus scheme: https; this agent "
                                  "serves plain HTTP: give the client http://, or serve TLS with --tls-cert and "
                                  "--tls-key), answered 400, from 127.0.0.1 "), warnings[0]
