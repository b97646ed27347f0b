"""Failed TLS handshakes are logged by an HTTPS agent, saying what to fix: a client that speaks plain HTTP
to it (Prometheus said ``EOF``), one that does not trust its certificate (``x509: certificate signed by
unknown authority``). Both were silent in the agent's log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from pathlib import Path

import pytest

from rigmon.agent.agent import Agent
from rigmon.agent.server import serve
from rigmon.agent.tls_files import HANDSHAKE_LOG_EVERY_S, HandshakeFaults
from rigmon.config import AgentConfig, AgentSection
from tests.agent.tls_certs import make_tls_files

TLS_LOGGER = "rigmon.agent.tls_files"


async def plain_http(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: agent\r\n\r\n")
    await writer.drain()
    await asyncio.wait_for(reader.read(), 10)  # the agent closes: Prometheus' "EOF"
    writer.close()


async def untrusting_tls(port: int) -> None:
    """The system's CAs only, as Prometheus without tls_config ca_file: the agent's certificate is refused.

    A blocking socket, as Go's (and curl's): it sends its alert before closing (asyncio's drops it).
    """

    def handshake() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                pytest.raises(ssl.SSLCertVerificationError):
            ssl.create_default_context().wrap_socket(raw, server_hostname="127.0.0.1")

    await asyncio.to_thread(handshake)


@pytest.mark.parametrize(("client", "says"), [
    (plain_http, "a plain HTTP request to this agent, which serves HTTPS: the client's URL must be https://"),
    (untrusting_tls, ("a client refused this agent's certificate {cert} (TLSV1_ALERT_UNKNOWN_CA): give it that "
                      "file as its CA")),
])
async def test_a_failed_handshake_is_logged_saying_what_to_fix(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                               client: object, says: str) -> None:
    tls = make_tls_files(tmp_path)
    config = AgentConfig(agent=AgentSection(node="n1", listen="127.0.0.1:0", root=str(tmp_path),
                                            state_dir=str(tmp_path / "state"), tls_cert_file=str(tls.cert_file),
                                            tls_key_file=str(tls.key_file)))
    bound: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    caplog.set_level(logging.WARNING, logger=TLS_LOGGER)
    serving = asyncio.create_task(serve(Agent(config, collectors={}), config.agent.listen, on_bound=bound.set_result))
    try:
        port = int((await asyncio.wait_for(bound, 10)).rpartition(":")[2])
        await client(port)  # type: ignore[operator]
        for _ in range(100):  # the server's side of the handshake runs on the loop after the client's
            if any(r.name == TLS_LOGGER for r in caplog.records):
                break
            await asyncio.sleep(0.02)
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
    lines = [r.getMessage() for r in caplog.records if r.name == TLS_LOGGER]
    assert len(lines) == 1 and lines[0].startswith(says.format(cert=tls.cert_file)), lines


def test_handshake_failures_are_logged_at_most_once_a_minute_for_each_kind(caplog: pytest.LogCaptureFixture) -> None:
    now = [10.0]
    faults = HandshakeFaults("/etc/rigmon/agent.pem", clock=lambda: now[0])
    refused = ssl.SSLError(1, "[SSL: SSLV3_ALERT_BAD_CERTIFICATE] sslv3 alert bad certificate")
    refused.reason = "SSLV3_ALERT_BAD_CERTIFICATE"
    caplog.set_level(logging.WARNING, logger=TLS_LOGGER)
    for _ in range(3):
        faults.note(refused)
    now[0] += HANDSHAKE_LOG_EVERY_S
    faults.note(refused)
    plain = ssl.SSLError(1, "[SSL: HTTP_REQUEST] http request")
    plain.reason = "HTTP_REQUEST"
    faults.note(plain)  # another kind: not hidden by the first
    lines = [r.getMessage() for r in caplog.records if r.name == TLS_LOGGER]
    assert faults.failed == 5 and len(lines) == 3 and "(4 failed TLS handshakes since the start" in lines[1]
    assert lines[2].startswith("a plain HTTP request to this agent")
    # Go (Prometheus) answers an untrusted certificate with "bad certificate".
    assert lines[0].startswith("a client refused this agent's certificate /etc/rigmon/agent.pem "
                               "(SSLV3_ALERT_BAD_CERTIFICATE)")
