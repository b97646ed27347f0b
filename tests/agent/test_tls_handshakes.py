"""Failed TLS handshakes are logged by an HTTPS agent, saying what to fix: a client that does not trust its
certificate (``x509: certificate signed by unknown authority``) was silent in the agent's log; a client that
leaves mid-handshake without a TLS alert (asyncio's, refusing the certificate), one that stalls, and one that
sends bytes that are neither TLS nor HTTP were not even counted. (A plain HTTP request is answered 400:
test_tls_plain_http.py.)"""

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
from rigmon.agent.tls_edge import Unalerted
from rigmon.agent.tls_files import HANDSHAKE_LOG_EVERY_S, HandshakeFaults
from rigmon.config import AgentConfig, AgentSection
from tests.agent.tls_certs import make_tls_files

TLS_LOGGER = "rigmon.agent.tls_files"
#: The start of a TLS 1.2 record holding a ClientHello of 80 bytes, which never comes.
CLIENT_HELLO_BEGUN = b"\x16\x03\x01\x00\x50\x01\x00"


async def untrusting_tls(port: int) -> None:
    """The system's CAs only, as Prometheus without tls_config ca_file: the agent's certificate is refused.

    A blocking socket, as Go's (and curl's): it sends its alert before closing (asyncio's drops it).
    """

    def handshake() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                pytest.raises(ssl.SSLCertVerificationError):
            ssl.create_default_context().wrap_socket(raw, server_hostname="127.0.0.1")

    await asyncio.to_thread(handshake)


async def untrusting_asyncio(port: int) -> None:
    """An asyncio client (the system's CAs only) refuses the certificate and drops the connection, alert unsent."""
    with pytest.raises(ssl.SSLCertVerificationError):
        await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, ssl=ssl.create_default_context()), 10)


async def sends(port: int, data: bytes, then_close: bool = True) -> None:
    """A raw client that sends ``data`` and closes (or waits until the agent closes)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    if not then_close:
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed by the handshake timeout
    writer.close()


async def begun_and_left(port: int) -> None:
    await sends(port, CLIENT_HELLO_BEGUN)


async def begun_and_stalled(port: int) -> None:
    await sends(port, CLIENT_HELLO_BEGUN, then_close=False)


async def short_garbage(port: int) -> None:
    """Fewer bytes than a TLS record header: OpenSSL waits for more, and raises nothing when the client leaves."""
    await sends(port, b"\r\n")


async def another_protocol(port: int) -> None:
    """An SSH client on the wrong port: OpenSSL refuses the first record (WRONG_VERSION_NUMBER)."""
    await sends(port, b"SSH-2.0-OpenSSH_9.6\r\n")


async def port_probe(port: int) -> None:
    """Connects and closes without a byte (a TCP health check): no handshake, nothing counted."""
    await sends(port, b"")


LEFT = "a client left during the TLS handshake without a TLS alert (an asyncio or Python client does so when it refuses"
NOT_TLS = "a client sent bytes that are neither TLS nor HTTP (another protocol's client on this port, or a port scanner)"


@pytest.mark.parametrize(("client", "says"), [
    (untrusting_tls, ("a client refused this agent's certificate {cert} (TLSV1_ALERT_UNKNOWN_CA): give it that "
                      "file as its CA")),
    (untrusting_asyncio, LEFT + " this agent's certificate {cert}: give it that file as its CA"),
    (begun_and_left, LEFT),
    (begun_and_stalled, "a client began a TLS handshake and did not complete it in time (head_timeout_s)"),
    (short_garbage, NOT_TLS + ", and left or stalled"),
    (another_protocol, NOT_TLS + " (WRONG_VERSION_NUMBER)"),
    (port_probe, None),
])
async def test_a_failed_handshake_is_counted_and_logged_saying_what_to_fix(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, client: object, says: str | None) -> None:
    tls = make_tls_files(tmp_path)
    config = AgentConfig(agent=AgentSection(node="n1", listen="127.0.0.1:0", root=str(tmp_path),
                                            state_dir=str(tmp_path / "state"), tls_cert_file=str(tls.cert_file),
                                            tls_key_file=str(tls.key_file), head_timeout_s=0.5))
    bound: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    caplog.set_level(logging.WARNING, logger=TLS_LOGGER)
    serving = asyncio.create_task(serve(Agent(config, collectors={}), config.agent.listen, on_bound=bound.set_result))
    try:
        port = int((await asyncio.wait_for(bound, 10)).rpartition(":")[2])
        await client(port)  # type: ignore[operator]
        # The server's side of the handshake runs on the loop after the client's; a probe is awaited as
        # long, and a probe of an agent that counted it would be seen by then.
        for _ in range(100):
            if any(r.name == TLS_LOGGER for r in caplog.records):
                break
            await asyncio.sleep(0.02)
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
    lines = [r.getMessage() for r in caplog.records if r.name == TLS_LOGGER]
    if says is None:
        assert lines == []
        return
    assert len(lines) == 1 and lines[0].startswith(says.format(cert=tls.cert_file)), lines
    assert "(1 failed TLS handshakes since the start" in lines[0]


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
    faults.note_unalerted(Unalerted.LEFT)  # another kind: not hidden by the first
    faults.note_unalerted(Unalerted.LEFT)
    lines = [r.getMessage() for r in caplog.records if r.name == TLS_LOGGER]
    assert faults.failed == 6 and len(lines) == 3 and "(4 failed TLS handshakes since the start" in lines[1]
    assert lines[2].startswith("a client left during the TLS handshake without a TLS alert")
    # Go (Prometheus) answers an untrusted certificate with "bad certificate".
    assert lines[0].startswith("a client refused this agent's certificate /etc/rigmon/agent.pem "
                               "(SSLV3_ALERT_BAD_CERTIFICATE)")
