"""A plain HTTP request to an agent serving HTTPS is answered ``400`` in plain HTTP, saying to use https://, and
counted; it was a dropped connection ("empty reply from server", Prometheus' ``EOF``). Real sockets on 127.0.0.1
against a real TLS agent with a certificate made in the test."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from rigmon.agent.agent import Agent
from rigmon.agent.connections import ConnectionLimits
from rigmon.agent.quiet_server import QuietServer
from rigmon.agent.server import make_server
from rigmon.agent.tls_edge import MAX_SNIFF_BYTES, plain_http
from rigmon.agent.tls_files import HandshakeFaults
from rigmon.config import AgentConfig, AgentSection
from tests.agent.helpers import listening_port
from tests.agent.tls_certs import TlsFiles, make_tls_files

REQUEST = b"GET /v1/frame HTTP/1.1\r\nHost: x\r\n\r\n"


@dataclass
class TlsAgent:
    port: int
    tls: TlsFiles
    limits: ConnectionLimits
    handshakes: HandshakeFaults


@pytest.fixture
async def tls_agent(tmp_path: Path) -> AsyncIterator[TlsAgent]:
    tls = make_tls_files(tmp_path)
    section = AgentSection(node="secure", root=str(tmp_path), state_dir=str(tmp_path / "state"), head_timeout_s=0.5,
                           tls_cert_file=str(tls.cert_file), tls_key_file=str(tls.key_file))
    server = make_server(Agent(AgentConfig(agent=section), collectors={}), "127.0.0.1", 0)
    assert isinstance(server, QuietServer) and isinstance(server.handshake_faults, HandshakeFaults)
    handshakes = server.handshake_faults
    serving = asyncio.create_task(server.serve())
    try:
        yield TlsAgent(await listening_port(server), tls, server.config.http.limits, handshakes)  # type: ignore[attr-defined]
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 10)


async def raw_exchange(port: int, *pieces: bytes) -> bytes:
    """Send ``pieces`` (one write each) on a plain TCP connection; everything the agent sends until it closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.05)  # the agent reads each piece on its own
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


async def test_a_plain_http_request_is_answered_400_saying_to_use_https(
        tls_agent: TlsAgent, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    answer = await raw_exchange(tls_agent.port, REQUEST)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 Bad Request\r\n") and b"\r\nconnection: close" in head.lower()
    error = json.loads(body)["error"]
    assert "plain HTTP" in error and "https://" in error and "scheme: https" in error
    assert tls_agent.limits.client_faults == 1 and tls_agent.handshakes.failed == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith(
        "A plain HTTP request (the client uses http://, Prometheus scheme: http; this agent serves HTTPS: give the "
        "client https://, Prometheus scheme: https and a tls_config ca_file), answered 400, from 127.0.0.1 "), warnings
    # The count that ends the line names what it counts: this request was well formed, only on the wrong scheme.
    assert warnings[0].endswith("(1 bad request (malformed, an upgrade, or the wrong scheme) since the start; "
                                "at most one is logged a minute)"), warnings


async def test_a_request_line_sent_in_pieces_is_still_answered(tls_agent: TlsAgent) -> None:
    answer = await raw_exchange(tls_agent.port, b"G", b"ET", REQUEST[3:])
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert tls_agent.limits.client_faults == 1


async def test_an_http_client_gets_the_400_and_an_https_client_is_served_after(tls_agent: TlsAgent) -> None:
    async with httpx.AsyncClient() as plain:
        answer = await plain.get(f"http://127.0.0.1:{tls_agent.port}/v1/frame")
    assert answer.status_code == 400 and "use an https:// URL" in answer.json()["error"]
    assert tls_agent.limits.client_faults == 1
    verify = ssl.create_default_context(cafile=str(tls_agent.tls.ca_file))
    async with httpx.AsyncClient(verify=verify) as https:
        served = await https.get(f"https://127.0.0.1:{tls_agent.port}/healthz")
    assert served.status_code == 200 and served.json() == {"ok": True}
    assert tls_agent.limits.client_faults == 1 and tls_agent.handshakes.failed == 0


async def test_a_beginning_of_a_method_that_stalls_is_closed_by_the_handshake_timeout(tls_agent: TlsAgent) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", tls_agent.port)
    writer.write(b"GE")
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 10) == b""  # closed, nothing answered
    writer.close()
    assert tls_agent.limits.client_faults == 0
    for _ in range(100):  # the server's side of the close runs on the loop after the client's read
        if tls_agent.handshakes.failed:
            break
        await asyncio.sleep(0.02)
    assert tls_agent.handshakes.failed == 1


@pytest.mark.parametrize(("first", "verdict"), [
    (b"GET ", True), (b"OPTIONS * HTTP/1.1", True), (b"DELETE /x", True),
    (b"G", None), (b"OPTIONS", None), (b"PO", None),
    (b"\x16\x03\x01\x02\x00", False), (b"GETS", False), (b"get /", False), (b"SSH-2.0-OpenSSH", False), (b"\r\n", False),
])
def test_the_first_bytes_say_plain_http_or_not(first: bytes, verdict: bool | None) -> None:
    assert plain_http(first) is verdict
    if verdict is None:
        assert len(first) < MAX_SNIFF_BYTES
