"""An export whose client stopped reading (a ``rigmon snapshot`` suspended with ^Z) is abandoned after
the send deadline: its connection dropped, its spool gone, its slot given back, one line logged."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from pathlib import Path

import pytest

from rigmon.agent import connections, exports
from rigmon.agent.agent import Agent
from rigmon.agent.server import make_server
from rigmon.config import AgentConfig, AgentSection
from tests.agent.export_helpers import stalled_exports
from tests.agent.helpers import listening_port
from tests.agent.test_api import Counter
from tests.agent.test_history_stream import FRAMES
from tests.agent.journal_frames import T0, FakeClock

#: The send deadline in this test (the agent's is `exports.SEND_DEADLINE_S`, 60 s).
DEADLINE_S = 1.0


def read_to_the_end(sock: socket.socket) -> tuple[int, str]:
    """Bytes the connection delivered, and how it ended (``eof`` or ``reset``)."""
    sock.settimeout(30)
    got = 0
    try:
        while piece := sock.recv(65536):
            got += len(piece)
    except ConnectionResetError:
        return got, "reset"
    return got, "eof"


def abandoned_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The agent's log lines so far that say an export was abandoned."""
    return [r.getMessage() for r in caplog.records if "abandoned" in r.getMessage()]


@pytest.mark.parametrize("parser", ["httptools", "h11"])
async def test_an_export_whose_client_takes_nothing_is_abandoned(
        tmp_path: Path, export_state: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        parser: str) -> None:
    monkeypatch.setattr(exports, "SEND_DEADLINE_S", DEADLINE_S)
    # The agent takes httptools when it is installed, else h11: both must drop the connection alike.
    monkeypatch.setattr(connections, "httptools_available", lambda: parser == "httptools")
    caplog.set_level(logging.INFO)
    window = {"from": repr(T0), "to": repr(T0 + FRAMES - 1), "frames": "1"}
    async with stalled_exports(tmp_path, export_state) as (_port, client, stalled):
        # Each answer's deadline runs from its own last byte taken: on a loaded machine one may be
        # abandoned a while before the other. Reading the sockets before both are would let the other
        # client take its answer whole (it is reading now), so wait for both, then for their slots.
        for _ in range(300):
            if len(abandoned_lines(caplog)) == 2:
                break
            await asyncio.sleep(0.1)
        for _ in range(300):  # their clients still connected, taking nothing: the slots come back
            r = await client.get("/v1/snapshot")
            assert r.status_code in (200, 503), r.text
            if r.status_code == 200:
                break
            await asyncio.sleep(0.1)
        assert r.status_code == 200, "the slots of the exports whose clients took nothing never came back"
        # The stalled clients see their connection dropped (never an answer cut short that looks whole).
        ends = await asyncio.gather(*(asyncio.to_thread(read_to_the_end, sock) for sock in stalled))
        assert [how for _, how in ends] == ["reset", "reset"], ends
        # Two exports at once are served again, each read whole.
        answers = await asyncio.gather(*(client.get("/v1/history", params=window) for _ in range(2)))
        assert [a.status_code for a in answers] == [200, 200]
        assert all(len(a.content) > 1_000_000 for a in answers)
    abandoned = abandoned_lines(caplog)
    assert len(abandoned) == 2, abandoned
    assert abandoned[0].startswith("GET /v1/history for 127.0.0.1 abandoned: the client took no byte for 1 s")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert not list(export_state.glob("*spool*")), list(export_state.iterdir())


def read_slowly(port: int, slow_s: float) -> bytes:
    """The raw answer to a frames export, read ~160 kB/s for ``slow_s``, then at once to its end."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        sock.settimeout(30)
        sock.connect(("127.0.0.1", port))
        sock.sendall(f"GET /v1/history?from={T0!r}&to={T0 + FRAMES - 1!r}&frames=1 HTTP/1.1\r\nHost: agent\r\n"
                     "Accept: application/x-ndjson\r\nConnection: close\r\n\r\n".encode())
        got = bytearray()
        slow_until = time.monotonic() + slow_s
        while piece := sock.recv(8192 if time.monotonic() < slow_until else 1 << 20):
            got += piece
            if time.monotonic() < slow_until:
                time.sleep(0.05)
        return bytes(got)


async def test_a_slow_client_that_keeps_reading_gets_the_whole_export(
        tmp_path: Path, export_state: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The deadline is on taking no byte, not on taking a piece (256 KiB) in time: a slow link that
    keeps reading (a piece takes it 1.6 s, past the deadline) gets the answer whole."""
    monkeypatch.setattr(exports, "SEND_DEADLINE_S", DEADLINE_S)
    config = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path / "root"), state_dir=str(export_state)))
    agent = Agent(config, clock=FakeClock(T0 + FRAMES), collectors={"counter": Counter()})
    server = make_server(agent, "127.0.0.1", 0)
    serving = asyncio.create_task(server.serve())
    try:
        port = await listening_port(server)
        raw = await asyncio.to_thread(read_slowly, port, 3.0)
    finally:
        server.should_exit = True
        await agent.stop()
        await asyncio.wait_for(serving, 10)
    assert raw.startswith(b"HTTP/1.1 200 ") and len(raw) > 1_000_000
    assert raw.endswith(b"\r\n0\r\n\r\n"), raw[-64:]  # the chunked answer's end: it came whole
    assert not [r for r in caplog.records if "abandoned" in r.getMessage()]
