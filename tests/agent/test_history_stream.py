"""/v1/history?frames=1 over loopback: sent as the client reads (the agent holds a piece of a large
answer, not all of it), and the same bytes as the answer built whole."""

from __future__ import annotations

import asyncio
import hashlib
import select
import socket
import sys
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest
from msgspec.structs import replace

from rigmon.agent.agent import Agent
from rigmon.agent.history_answers import MAX_HISTORY_FRAMES
from rigmon.agent.journal import JournalReader, JournalStore, encode_history, gzip_member
from rigmon.agent.server import make_server
from rigmon.config import AgentConfig, AgentSection
from rigmon.schema import SCHEMA_VERSION, CollectorStatus, Frame, Readings, TemperatureReading
from tests.agent.helpers import listening_port
from tests.agent.test_api import Counter
from tests.agent.journal_frames import T0, FakeClock
from tests.snapshot.test_journal_snapshot import run_in_read_only_dir

#: Frames in the journal: four whole blocks of 300 (none left in the recent table).
FRAMES = 1200


def bulky_frame(seq: int) -> Frame:
    """A frame of ~30 kB (an 8-GPU node's size)."""
    temps = tuple(TemperatureReading(sensor=f"s{i}", label=f"sensor {i} of frame {seq}", temp_c=float(i + seq % 7))
                  for i in range(400))
    return Frame(schema=SCHEMA_VERSION, node="t1", run_id="run1", seq=seq, taken_at=T0 + seq - 1, agent_start=T0,
                 collectors={"bulky": CollectorStatus(state="ok", ok=True)}, readings=Readings(temperatures=temps))


def filled_state(state: Path) -> None:
    clock = FakeClock()
    store = JournalStore(state, clock)
    store.write([bulky_frame(i + 1) for i in range(FRAMES)])
    clock.t = T0 + FRAMES + 3600
    store.compact(max_blocks=100)
    assert store.conn.execute("SELECT COUNT(*) FROM frames").fetchone()[0] == 0
    store.close()


def whole_answer(state: Path, shape: str) -> bytes:
    """The answer as the agent built it whole before it was streamed (history_answers at 75633b5)."""
    with JournalReader(state) as reader:
        history = reader.history("t1", T0, T0 + FRAMES - 1, 1.0, set())
        raw = reader.frames_json(T0, T0 + FRAMES - 1, MAX_HISTORY_FRAMES + 1)
        packed = reader.frames_gzip(T0, T0 + FRAMES - 1, MAX_HISTORY_FRAMES)
    head = encode_history(replace(history, more=len(raw) > MAX_HISTORY_FRAMES))
    if shape == "gzip":
        return gzip_member(head + b"\n") + packed.body
    if shape == "lines":
        return head + b"\n" + b"".join(line + b"\n" for line in raw)
    return head[: -len(b"[]}")] + b"[" + b",".join(raw) + b"]}"


ACCEPT = {"gzip": "application/gzip", "lines": "application/x-ndjson", "json": "application/json"}


def held_by_connections(agent_server: object) -> int:
    opened: Sequence[object] = agent_server.config.http.limits.open  # type: ignore[attr-defined]
    return max([0, *(c.transport.get_write_buffer_size() for c in opened)])  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state directory whose journal holds `FRAMES` bulky frames (written once for the module)."""
    path = tmp_path_factory.mktemp("history-stream") / "state"
    filled_state(path)
    return path


@pytest.mark.parametrize("shape", ["gzip", "lines", "json"])
async def test_a_client_that_does_not_read_a_large_history_holds_a_piece_of_it_not_all(
        tmp_path: Path, state: Path, shape: str) -> None:
    """/v1/history?frames=1 built its whole answer in memory (an hour of an 8-GPU node: ~200 MB of JSON)
    and handed it to the connection at once: a few clients that did not read took the agent past its
    unit's 512 MB. Now the frames wait in a spool (a file beside the journal beyond 1 MB) and go out
    in pieces as the client takes them; a client that reads it all gets the same bytes as before."""
    expected = whole_answer(state, shape)
    config = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path / "root"), state_dir=str(state)))
    agent = Agent(config, clock=FakeClock(T0 + FRAMES), collectors={"counter": Counter()})
    server = make_server(agent, "127.0.0.1", 0)
    serving = asyncio.create_task(server.serve())
    request = (f"GET /v1/history?from={T0!r}&to={T0 + FRAMES - 1!r}&frames=1 HTTP/1.1\r\nHost: agent\r\n"
               f"Accept: {ACCEPT[shape]}\r\n\r\n").encode()
    try:
        port = await listening_port(server)
        tracemalloc.start()
        try:
            with socket.socket() as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.connect(("127.0.0.1", port))
                sock.sendall(request)
                held = 0
                for _ in range(1000):  # until the answer has begun (the spool is built)
                    if select.select([sock], [], [], 0)[0]:
                        break
                    await asyncio.sleep(0.01)
                for _ in range(20):  # the answer's state once the agent has written what it could
                    await asyncio.sleep(0.02)
                    held = max(held, held_by_connections(server))
                _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # The plain answers are ~36 MB, the gzip one some MB: the agent held all of it at once.
        assert len(expected) > 2_000_000
        assert held < 1024 * 1024, f"{held} bytes of the answer wait in the agent for a client that does not read"
        assert peak < 4 * 1024 * 1024, f"{peak} bytes allocated at once for an answer of {len(expected)}"

        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            async with client.stream("GET", "/v1/history", headers={"Accept": ACCEPT[shape]},
                                     params={"from": repr(T0), "to": repr(T0 + FRAMES - 1), "frames": "1"}) as r:
                assert r.status_code == 200
                assert r.headers["content-type"].startswith(ACCEPT[shape])
                digest, size = hashlib.sha256(), 0
                async for piece in r.aiter_raw():
                    digest.update(piece)
                    size += len(piece)
        assert (size, digest.hexdigest()) == (len(expected), hashlib.sha256(expected).hexdigest())
    finally:
        server.should_exit = True
        await agent.stop()
        await asyncio.wait_for(serving, 10)


def stalled_export(port: int) -> socket.socket:
    """A connection that asks for the journal's frames and does not read the answer."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET /v1/history?from={T0!r}&to={T0 + FRAMES - 1!r}&frames=1 HTTP/1.1\r\nHost: agent\r\n"
                 "Accept: application/x-ndjson\r\n\r\n".encode())
    return sock


async def test_exports_beyond_two_at_once_are_told_to_come_back(tmp_path: Path, state: Path) -> None:
    """Each client could start any number of exports (an hour of the journal read, spooled and sent;
    every raw source read) on a training node at once. Beyond two, the agent answers 503 with
    Retry-After; the slots come back when the answers have gone, or their clients have."""
    config = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path / "root"), state_dir=str(state)))
    agent = Agent(config, clock=FakeClock(T0 + FRAMES), collectors={"counter": Counter()})
    server = make_server(agent, "127.0.0.1", 0)
    serving = asyncio.create_task(server.serve())
    window = {"from": repr(T0), "to": repr(T0 + FRAMES - 1)}
    try:
        port = await listening_port(server)
        # httpx's 5 s default is no part of what is tested: with the two stalled exports spooling an hour of
        # the journal beside them, the window's series took longer than that on a loaded 2-core machine.
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            stalled = [stalled_export(port), stalled_export(port)]
            for _ in range(500):  # until both answers are under way (a snapshot is an export too)
                r = await client.get("/v1/snapshot")
                if r.status_code == 503:
                    break
                await asyncio.sleep(0.01)
            for path, params in (("/v1/history", {**window, "frames": "1"}), ("/v1/snapshot", {})):
                r = await client.get(path, params=params)
                assert r.status_code == 503, path
                assert r.headers["retry-after"] == "5"
                assert "2 exports (history frames, snapshots) are being served" in r.json()["error"]
            # Not an export: the series of the window.
            assert (await client.get("/v1/history", params=window)).status_code == 200
            # Nor a dashboard filling a gap in its stream (300 s at a time): refused, it would be
            # drawn as frames lost.
            fill = await client.get("/v1/history", params={"from": repr(T0), "to": repr(T0 + 300), "frames": "1"})
            assert fill.status_code == 200 and len(fill.json()["frames"]) == 301
            for sock in stalled:
                sock.close()
            for _ in range(500):  # their clients gone, the slots come back
                r = await client.get("/v1/history", params={**window, "frames": "1"})
                if r.status_code == 200:
                    break
                await asyncio.sleep(0.01)
            for _ in range(3):  # read whole, one after another: each gives its slot back
                r = await client.get("/v1/history", params={**window, "frames": "1"})
                assert r.status_code == 200 and len(r.content) > 1_000_000
                assert (await client.get("/v1/snapshot")).status_code == 200
    finally:
        server.should_exit = True
        await agent.stop()
        await asyncio.wait_for(serving, 10)


def test_a_large_answer_from_a_journal_on_a_read_only_file_system_spools_elsewhere(tmp_path: Path) -> None:
    """A state directory on a read-only file system still has its journal answered from (README): the
    spool of an answer over 1 MiB goes to the system's temporary directory, not a 503 'journal cannot be
    read: Read-only file system'."""
    state = tmp_path / "state"
    filled_state(state)
    script = f"""if True:
        import gzip, sys
        from pathlib import Path
        from rigmon.agent.history_answers import frames_answer
        answer = frames_answer(Path(sys.argv[1]), "t1", {T0!r}, {T0 + FRAMES - 1!r}, 1.0, None, "gzip")
        print(len(gzip.decompress(answer.read_all()).splitlines()))
    """
    proc = run_in_read_only_dir(state, [sys.executable, "-c", script, str(state / "journal.sqlite3")])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(FRAMES + 1)]
