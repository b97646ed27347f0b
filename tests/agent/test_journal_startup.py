"""/v1/history before the journal writer has opened its file: an empty window, not a 503.

An agent built but not started is the moment right after a start, before the writer thread
opened (and created) the journal: the writer's status is ``pending`` and there is no file.
"""

from __future__ import annotations

import asyncio
import gzip
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from rigmon.agent.agent import Agent
from rigmon.agent.history_answers import FRAMES_HEADER
from rigmon.agent.journal import JournalStore
from rigmon.config import AgentConfig, AgentSection
from rigmon.schema import History, decode
from rigmon.snapshot.pull import pull_agent
from tests.agent.test_api import Counter
from tests.agent.journal_frames import T0, FakeClock, frame

WINDOW = {"from": repr(T0 - 60), "to": repr(T0 + 60)}


def journaled_agent(tmp_path: Path, state_dir: Path) -> Agent:
    config = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path / "root"), interval_s=0.02,
                                            state_dir=str(state_dir)))
    return Agent(config, collectors={"counter": Counter()})


@pytest.fixture
async def unopened(tmp_path: Path) -> AsyncIterator[tuple[Agent, httpx.AsyncClient]]:
    agent = journaled_agent(tmp_path, tmp_path / "state")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=agent.app()), base_url="http://agent") as client:
        yield agent, client


async def test_history_before_the_journal_exists_is_an_empty_window(
        unopened: tuple[Agent, httpx.AsyncClient], tmp_path: Path) -> None:
    agent, client = unopened
    assert agent.journal is not None and agent.journal.status.state == "pending"
    assert not (tmp_path / "state" / "journal.sqlite3").exists()
    r = await client.get("/v1/history", params=WINDOW)
    assert r.status_code == 200, r.text
    history = decode(History, r.content)
    assert (history.node, history.from_at, history.to_at, history.tier) == ("t1", T0 - 60, T0 + 60, "frames")
    assert history.series == {} and history.events == () and history.frames == ()
    r = await client.get("/v1/history", params={**WINDOW, "frames": "1"})
    assert r.status_code == 200 and decode(History, r.content).frames == ()


@pytest.mark.parametrize("accept", ["application/x-ndjson", "application/gzip"])
async def test_frame_lines_before_the_journal_exists_hold_only_the_history_line(
        unopened: tuple[Agent, httpx.AsyncClient], accept: str) -> None:
    _, client = unopened
    r = await client.get("/v1/history", params={**WINDOW, "frames": "1"}, headers={"Accept": accept})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith(accept) and r.headers[FRAMES_HEADER] == "0"
    body = gzip.decompress(r.content) if accept == "application/gzip" else r.content
    lines = body.splitlines()
    assert len(lines) == 1 and decode(History, lines[0]).series == {}


async def test_history_before_the_writer_opens_still_shows_earlier_runs(tmp_path: Path) -> None:
    store = JournalStore(tmp_path / "state", FakeClock())
    store.begin_run("run1", "t1", T0)
    store.write([frame(i + 1, T0 + i, float(i)) for i in range(10)])
    store.close()
    agent = journaled_agent(tmp_path, tmp_path / "state")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=agent.app()), base_url="http://agent") as client:
        # Short enough for whole frames at the agent's 0.02 s interval.
        r = await client.get("/v1/history", params={"from": repr(T0 - 1), "to": repr(T0 + 20)})
    assert r.status_code == 200
    assert len(decode(History, r.content).series["host.cpu_pct"].at) == 10


async def test_history_of_a_journal_that_failed_to_open_is_503(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    agent = journaled_agent(tmp_path, blocked)
    # Usable when the agent took it (one that is not is refused at start), replaced by a file before
    # the journal opened: the journal's open fails.
    agent.lock_state_dir()
    shutil.rmtree(blocked)
    blocked.write_text("a file where the state directory should be")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=agent.app()), base_url="http://agent") as client:
        agent.start()
        try:
            assert agent.journal is not None
            for _ in range(500):
                if agent.journal.status.state == "error":
                    break
                await asyncio.sleep(0.01)
            assert agent.journal.status.state == "error"
            r = await client.get("/v1/history", params=WINDOW)
        finally:
            await agent.stop()
    assert r.status_code == 503 and "journal" in r.json()["error"]


async def test_a_snapshot_of_a_node_whose_journal_is_not_written_yet_keeps_the_node(
        unopened: tuple[Agent, httpx.AsyncClient]) -> None:
    _, client = unopened
    part = await pull_agent(client, "http://agent", 60.0)
    assert part.error is None
    assert part.history is not None and part.history.series == {}
    assert part.frame_count == 0


def half_created(state_dir: Path) -> None:
    """The file as a reader met it while a writer created the tables one by one: some, no format row."""
    import sqlite3

    state_dir.mkdir(parents=True)
    with sqlite3.connect(state_dir / "journal.sqlite3") as conn:
        conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("CREATE TABLE runs(run_id TEXT PRIMARY KEY)")


@pytest.mark.parametrize("frames", ["0", "1"])
async def test_history_while_the_writer_creates_the_tables_is_an_empty_window(
        unopened: tuple[Agent, httpx.AsyncClient], tmp_path: Path, frames: str) -> None:
    # Under load a snapshot right after the start met such a file: 503 "no such table: events".
    agent, client = unopened
    half_created(tmp_path / "state")
    assert agent.journal is not None and agent.journal.status.state == "pending"
    r = await client.get("/v1/history", params={**WINDOW, "frames": frames})
    assert r.status_code == 200, r.text
    assert decode(History, r.content).events == ()


def test_the_writer_creates_the_tables_in_one_transaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    from rigmon.agent.journal import store as store_module
    from rigmon.agent.journal.layout import SCHEMA_SQL, JournalError

    # A statement that fails after every table was created: none of them may stay behind.
    monkeypatch.setattr(store_module, "SCHEMA_SQL", SCHEMA_SQL + "CREATE TABLE meta(key TEXT);\n")
    with pytest.raises(JournalError, match="already exists"):
        JournalStore(tmp_path / "state", FakeClock())
    with sqlite3.connect(tmp_path / "state" / "journal.sqlite3") as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []
