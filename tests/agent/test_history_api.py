"""/v1/history from the journal and /v1/snapshot, in process over ASGI."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from rigmon.agent.agent import Agent
from rigmon.agent.history_answers import (
    FRAMES_HEADER,
    LAST_FRAME_HEADER,
    MAX_HISTORY_FRAMES,
    UNREADABLE_HEADER,
    frames_answer,
)
from rigmon.agent.journal import JournalReader, JournalStore
from rigmon.config import AgentConfig, AgentSection
from rigmon.schema import Frame, History, NodeCapture, decode
from rigmon.sim import write_tree
from tests.agent.test_api import Counter


async def wait_journaled(agent: Agent, frames: int) -> None:
    assert agent.journal is not None
    for _ in range(1000):
        if agent.journal.frames_written >= frames:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("frames never reached the journal")


@pytest.fixture
async def journaled(tmp_path: Path) -> AsyncIterator[tuple[Agent, httpx.AsyncClient]]:
    write_tree(tmp_path / "root", {
        "/proc/mdstat": "Personalities : [raid0]\nmd0 : active raid0 nvme1n1[1] nvme0n1[0]\nunused devices: <none>\n",
        "/sys/class/net/eth0/speed": "10000\n",
        "/sys/block/md0/md/array_state": "clean\n",
        "/sys/block/md0/md/dev-nvme0n1/state": "in_sync\n",
        "/sys/bus/pci/devices/0000:1a:00.0/current_link_speed": "8.0 GT/s PCIe\n",
        "/sys/bus/pci/devices/0000:1a:00.0/config": "binary",
    })
    config = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path / "root"), interval_s=0.02,
                                            state_dir=str(tmp_path / "state"), token_file="/etc/rigmon/token"))
    agent = Agent(config, collectors={"counter": Counter()})
    transport = httpx.ASGITransport(app=agent.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        agent.start()
        yield agent, client
    await agent.stop()


async def test_history_serves_series_events_and_frames(journaled: tuple[Agent, httpx.AsyncClient]) -> None:
    agent, client = journaled
    await wait_journaled(agent, 20)
    assert agent.buffer is not None and agent.buffer.latest is not None
    newest = agent.buffer.latest.taken_at
    r = await client.get("/v1/history", params={"from": agent.sampler.agent_start - 1, "to": newest})
    assert r.status_code == 200, r.text
    history = decode(History, r.content)
    assert history.tier == "frames" and history.node == "t1"
    temps = history.series["temperatures[c].temp_c"]
    assert list(temps.max) == sorted(temps.max) and len(temps.at) >= 20
    assert any(e.kind == "agent_started" for e in history.events)
    assert history.frames == ()

    r = await client.get("/v1/history", params={"from": agent.sampler.agent_start - 1, "to": newest, "frames": "1"})
    with_frames = decode(History, r.content)
    assert with_frames.series == {}  # frames carry every value; series only by name
    kept = {f.seq: f for f in agent.buffer.since(0)}
    assert [f.seq for f in with_frames.frames] == sorted(f.seq for f in with_frames.frames)
    assert all(kept[f.seq] == f for f in with_frames.frames if f.seq in kept)

    r = await client.get("/v1/history", params={"from": agent.sampler.agent_start - 1, "to": newest,
                                                "series": "temperatures[c].temp_c,nope"})
    assert set(decode(History, r.content).series) == {"temperatures[c].temp_c"}


async def test_frames_show_the_journal_status(journaled: tuple[Agent, httpx.AsyncClient]) -> None:
    agent, client = journaled
    await wait_journaled(agent, 3)
    await asyncio.sleep(0.1)
    frame = decode(Frame, (await client.get("/v1/latest")).content)
    assert frame.collectors["journal"].state == "ok"


@pytest.mark.parametrize("params, reason", [
    ({"from": "yesterday"}, "from must be Unix seconds"),
    ({"to": "nan"}, "to must be Unix seconds"),
    ({"to": "1e999"}, "finite"),
    ({"from": "1_000"}, "from must be Unix seconds"),
    ({"from": "\uff11"}, "from must be Unix seconds"),
    ({"from": "200", "to": "100"}, "is after to"),
    ({"from": "0", "to": "7200", "frames": "1"}, "frames=1 covers at most"),
    ({"frames": "yes"}, "frames must be 0 or 1"),
    ({"series": ","}, "at least one series"),
    ({"since": "5"}, "unknown parameter 'since'"),
])
async def test_history_bad_parameters_are_400(journaled: tuple[Agent, httpx.AsyncClient],
                                              params: dict[str, str], reason: str) -> None:
    _, client = journaled
    r = await client.get("/v1/history", params=params)
    assert r.status_code == 400
    assert reason in r.json()["error"]


async def test_history_is_404_without_a_journal(tmp_path: Path) -> None:
    agent = Agent(AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path))), collectors={"counter": Counter()})
    assert agent.journal is None
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=agent.app()), base_url="http://a") as client:
        r = await client.get("/v1/history")
    assert r.status_code == 404 and "no journal" in r.json()["error"]


async def test_snapshot_captures_raw_sources_and_redacts(journaled: tuple[Agent, httpx.AsyncClient]) -> None:
    agent, client = journaled
    await wait_journaled(agent, 2)
    cap = decode(NodeCapture, (await client.get("/v1/snapshot")).content)
    assert cap.files["/proc/mdstat"].startswith("Personalities : [raid0]")
    assert cap.files["/sys/block/md0/md/dev-nvme0n1/state"] == "in_sync"
    assert cap.files["/sys/bus/pci/devices/0000:1a:00.0/current_link_speed"] == "8.0 GT/s PCIe"
    assert "/sys/bus/pci/devices/0000:1a:00.0/config" not in cap.files
    assert cap.config["agent"]["token_file"] == "/etc/rigmon/token"
    assert cap.info.node == "t1" and cap.latest is not None


async def test_the_journal_holds_what_the_stream_showed(tmp_path: Path) -> None:
    config = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path), interval_s=0.02,
                                            state_dir=str(tmp_path / "state")))
    agent = Agent(config, collectors={"counter": Counter()})
    agent.app()
    agent.start()
    await wait_journaled(agent, 10)
    await agent.stop()
    assert agent.buffer is not None
    with JournalReader(tmp_path / "state") as reader:
        stored = reader.frames(0, float("inf"))
        (run,) = reader.runs()
    assert [f.seq for f in stored] == [f.seq for f in agent.buffer.since(0)]
    assert stored == agent.buffer.since(0)
    assert run.clean is True and run.run_id == agent.run_id and run.info and '"node": "t1"' in run.info


async def test_history_frames_as_json_lines(journaled: tuple[Agent, httpx.AsyncClient]) -> None:
    agent, client = journaled
    await wait_journaled(agent, 10)
    params = {"from": agent.sampler.agent_start - 1, "to": agent.clock.time(), "frames": "1"}
    r = await client.get("/v1/history", params=params, headers={"Accept": "application/x-ndjson"})
    assert r.headers["content-type"].startswith("application/x-ndjson")
    head, *lines = r.content.splitlines()
    assert decode(History, head).frames == ()
    plain = decode(History, (await client.get("/v1/history", params=params)).content)
    assert [decode(Frame, line) for line in lines][: len(plain.frames)] == list(plain.frames)
    assert len(lines) >= 10


async def test_history_frames_as_gzip(journaled: tuple[Agent, httpx.AsyncClient]) -> None:
    agent, client = journaled
    await wait_journaled(agent, 10)
    params = {"from": agent.sampler.agent_start - 1, "to": agent.clock.time(), "frames": "1"}
    r = await client.get("/v1/history", params=params, headers={"Accept": "application/gzip"})
    assert r.headers["content-type"] == "application/gzip" and "content-encoding" not in r.headers
    # The first gzip member is the History line; the frames follow as further members.
    dec = zlib.decompressobj(31)
    head = dec.decompress(r.content)
    assert dec.eof and decode(History, head).frames == ()
    lines = gzip.decompress(dec.unused_data).splitlines()
    count = int(r.headers[FRAMES_HEADER])
    assert count == len(lines) >= 10
    assert float(r.headers[LAST_FRAME_HEADER]) == decode(Frame, lines[-1]).taken_at
    with JournalReader(agent.journal.path) as reader:  # type: ignore[union-attr]
        assert lines == reader.frames_json(float(params["from"]), decode(Frame, lines[-1]).taken_at)


async def test_json_lines_are_never_content_encoded(journaled: tuple[Agent, httpx.AsyncClient]) -> None:
    # httpx (like most clients) asks for gzip content-encoding by default and would decode
    # only the first member of a multi-member body: the agent must not answer that way.
    agent, client = journaled
    await wait_journaled(agent, 5)
    params = {"from": agent.sampler.agent_start - 1, "to": agent.clock.time(), "frames": "1"}
    r = await client.get("/v1/history", params=params,
                         headers={"Accept": "application/x-ndjson", "Accept-Encoding": "gzip"})
    assert "content-encoding" not in r.headers
    head, *lines = r.content.splitlines()
    assert len(lines) == int(r.headers[FRAMES_HEADER]) >= 5


def test_history_lines_pass_blocks_and_cut_at_the_limit(tmp_path: Path) -> None:
    from tests.agent.journal_frames import T0, FakeClock, frame

    clock = FakeClock()
    store = JournalStore(tmp_path, clock)
    store.write([frame(i + 1, T0 + i, float(i % 7)) for i in range(MAX_HISTORY_FRAMES + 800)])
    clock.t = T0 + MAX_HISTORY_FRAMES + 800
    store.compact(max_blocks=100)
    blocks = [body for (body,) in store.conn.execute("SELECT body FROM blocks ORDER BY id")]
    store.close()
    end = T0 + MAX_HISTORY_FRAMES + 799
    packed = frames_answer(tmp_path / "journal.sqlite3", "n1", T0, end, 1.0, None, "gzip")
    plain = frames_answer(tmp_path / "journal.sqlite3", "n1", T0, end, 1.0, None, "lines")
    assert packed.media_type == "application/gzip" and plain.media_type == "application/x-ndjson"
    packed_body, plain_body = packed.read_all(), plain.read_all()
    assert b"".join(blocks[:MAX_HISTORY_FRAMES // 300]) in packed_body
    assert gzip.decompress(packed_body) == plain_body
    head, *lines = plain_body.splitlines()
    assert decode(History, head).more is True and len(lines) == MAX_HISTORY_FRAMES
    assert packed.headers[FRAMES_HEADER] == str(MAX_HISTORY_FRAMES)
    assert float(packed.headers[LAST_FRAME_HEADER]) == T0 + MAX_HISTORY_FRAMES - 1


def spoilt_journal(tmp_path: Path) -> tuple[Path, float]:
    """A journal of 1000 frames at 1 Hz from T0 (returned) whose block of frames 201-300 went bad on the
    disk, SQLite's pages sound."""
    from tests.agent.test_journal_blocks import T0, filled, spoil

    store = filled(tmp_path, 1000, block_frames=100)
    store.compact()
    spoil(store, "blocks", 3)
    store.close()
    return tmp_path / "journal.sqlite3", T0


@pytest.mark.parametrize("gzipped", [True, False])
def test_history_lines_say_how_many_stored_parts_were_left_out(tmp_path: Path, gzipped: bool) -> None:
    path, t0 = spoilt_journal(tmp_path)
    answer = frames_answer(path, "n1", t0, t0 + 999, 1.0, None, "gzip" if gzipped else "lines")
    answer.close()
    assert answer.headers[FRAMES_HEADER] == "900"
    assert answer.headers[UNREADABLE_HEADER] == "1"
    sound = frames_answer(path, "n1", t0 + 400, t0 + 999, 1.0, None, "gzip" if gzipped else "lines")
    sound.close()
    assert UNREADABLE_HEADER not in sound.headers


async def test_history_json_says_how_many_stored_parts_were_left_out(tmp_path: Path) -> None:
    from types import SimpleNamespace
    from typing import Any, cast

    from rigmon.agent.api import ApiState, build_app
    from rigmon.agent.buffer import FrameBuffer

    path, t0 = spoilt_journal(tmp_path)
    info = cast(Any, lambda: SimpleNamespace(node="n1"))  # /v1/history reads only the node's name
    state = ApiState(buffer=FrameBuffer(10), info=info, token=None, max_streams=4, max_request_bytes=1 << 16,
                     journal_path=path, now=lambda: t0 + 1000)
    transport = httpx.ASGITransport(app=build_app(state))
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        for params in ({"from": repr(t0), "to": repr(t0 + 999)},
                       {"from": repr(t0), "to": repr(t0 + 999), "frames": "1"}):
            r = await client.get("/v1/history", params=params)
            assert r.status_code == 200, r.text
            assert int(r.headers[UNREADABLE_HEADER]) >= 1, params
        r = await client.get("/v1/history", params={"from": repr(t0 + 400), "to": repr(t0 + 999), "frames": "1"})
        assert r.status_code == 200 and UNREADABLE_HEADER not in r.headers


async def test_a_snapshot_says_the_agent_left_damaged_parts_of_its_journal_out(tmp_path: Path) -> None:
    from rigmon.snapshot.bundle import bundle_members
    from rigmon.snapshot.pull import pull_agent
    from tests.agent.journal_frames import FakeClock

    state = tmp_path / "state"
    state.mkdir()
    _, t0 = spoilt_journal(state)
    config = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path / "root"), interval_s=0.02,
                                            state_dir=str(state)))
    # Built, not started: the window ends at the agent's clock, just after the journal's last frame.
    agent = Agent(config, clock=FakeClock(t0 + 1000), collectors={"counter": Counter()})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=agent.app()), base_url="http://agent") as client:
        part = await pull_agent(client, "http://agent", 1001.0)
    assert part.frame_count == 900
    assert part.error is not None and part.error.startswith(
        "the agent's journal is damaged: stored parts of the window that do not decompress were left out (")
    errors = dict(bundle_members([part], 1001.0, "report", t0 + 1000))
    assert f"pull: {part.error}" in next(v for k, v in errors.items() if k.endswith("/ERRORS.txt")).decode()
