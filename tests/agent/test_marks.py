"""POST /v1/marks: the control token, checked text, and the mark's way into frames, the journal and /metrics."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from rigmon.agent.agent import Agent
from rigmon.agent.control import MAX_MARK_CHARS
from rigmon.config import AgentConfig, AgentSection
from rigmon.schema import Event, History, decode
from rigmon.agent.server import make_server
from tests.agent.helpers import listening_port
from tests.agent.test_api import Counter, wait_for_seq
from tests.agent.test_history_api import wait_journaled

READ, CONTROL = "read-t0k", "control-t0k"


@pytest.fixture
async def agent_client(tmp_path: Path) -> AsyncIterator[tuple[Agent, httpx.AsyncClient]]:
    config = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path / "root"), interval_s=0.02,
                                            state_dir=str(tmp_path / "state")))
    (tmp_path / "root").mkdir()
    agent = Agent(config, token=READ, control_token=CONTROL, collectors={"counter": Counter()})
    transport = httpx.ASGITransport(app=agent.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        agent.start()
        yield agent, client
    await agent.stop()


@pytest.fixture
async def served_agent(tmp_path: Path) -> AsyncIterator[tuple[Agent, str]]:
    """An agent with read and control tokens, served by uvicorn on 127.0.0.1 (a free port)."""
    config = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path / "root"), interval_s=0.02,
                                            state_dir=str(tmp_path / "state")))
    (tmp_path / "root").mkdir()
    agent = Agent(config, token=READ, control_token=CONTROL, collectors={"counter": Counter()})
    server = make_server(agent, "127.0.0.1", 0)
    agent.start()
    task = asyncio.create_task(server.serve())
    port = await listening_port(server)
    yield agent, f"http://127.0.0.1:{port}"
    server.should_exit = True
    await agent.stop()
    await asyncio.wait_for(task, 10)


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_mark_reaches_frames_history_and_metrics(agent_client: tuple[Agent, httpx.AsyncClient]) -> None:
    agent, client = agent_client
    await wait_for_seq(agent, 2)
    r = await client.post("/v1/marks", json={"text": "  epoch 3 checkpoint ", "by": "train.py"},
                          headers=_auth(CONTROL))
    assert r.status_code == 201, r.text
    mark = decode(Event, r.content)
    assert (mark.kind, mark.severity, mark.subject, mark.message) == ("mark", "info", "node:t1", "epoch 3 checkpoint")
    assert mark.data == {"text": "epoch 3 checkpoint", "by": "train.py"}
    assert agent.buffer is not None and agent.buffer.latest is not None
    await wait_for_seq(agent, agent.buffer.latest.seq + 2)
    assert any(e.id == mark.id for f in agent.buffer.since(0) for e in f.events)

    await wait_journaled(agent, agent.buffer.latest.seq)
    r = await client.get("/v1/history", params={"from": mark.at - 5, "to": mark.at + 5}, headers=_auth(READ))
    history = decode(History, r.content)
    assert [e.message for e in history.events if e.kind == "mark"] == ["epoch 3 checkpoint"]

    text = (await client.get("/metrics", headers=_auth(READ))).text
    assert 'rigmon_marks_total{node="t1"} 1.0' in text
    assert 'rigmon_mark_last_info{node="t1",text="epoch 3 checkpoint"} 1.0' in text
    assert 'rigmon_events_total{code="",kind="mark",node="t1",subject="node:t1"} 1.0' in text


@pytest.mark.parametrize(("body", "reason"), [
    ({"text": ""}, "empty"),
    ({"text": "x" * (MAX_MARK_CHARS + 1)}, "at most"),
    ({"text": "epoch\x1b[31m 3"}, "control or bidi character"),
    ({"text": "evil \u202e txt"}, "control or bidi character"),
    ({"text": "two\u2028lines"}, "control or bidi character"),
    ({"text": "ok\nsecond line"}, "control or bidi character"),
    ({"text": 3}, "string"),
    ({"by": "x"}, "string"),
    ({"text": "ok", "by": 5}, "string"),
])
async def test_bad_marks_are_refused(agent_client: tuple[Agent, httpx.AsyncClient], body: object,
                                     reason: str) -> None:
    _, client = agent_client
    r = await client.post("/v1/marks", json=body, headers=_auth(CONTROL))
    assert r.status_code == 400 and reason in r.json()["error"]


@pytest.mark.parametrize("body", [b'{"text": "epoch \\ud800 3"}', b'{"text": "epoch 3", "by": "\\udfff"}'])
async def test_a_lone_surrogate_is_refused_and_frames_stay_readable(served_agent: tuple[Agent, str],
                                                                    body: bytes) -> None:
    # JSON may escape a lone surrogate and json.loads takes it, but no UTF-8 can carry it: a mark
    # holding one broke the encoding of its frame (/v1/samples and every stream answered 500 while
    # the buffer held it) and stopped the journal's writer thread.
    agent, url = served_agent
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        r = await client.post("/v1/marks", content=body,
                              headers={**_auth(CONTROL), "Content-Type": "application/json"})
        assert r.status_code == 400 and "surrogate" in r.json()["error"], r.text
        assert agent.buffer is not None and agent.buffer.latest is not None
        await wait_for_seq(agent, agent.buffer.latest.seq + 3)
        r = await client.get("/v1/samples", params={"since": 0}, headers=_auth(READ))
        assert r.status_code == 200
        assert not any(e["kind"] == "mark" for f in r.json()["frames"] for e in f["events"])


@pytest.mark.parametrize(("body", "where"), [
    ('{"text": "époque 3"}'.encode("latin-1"), "byte 0xe9 at offset 10"),  # a shell in a Latin-1 locale
    ('{"text": "epoch 3"}'.encode("utf-16"), "byte 0xff at offset 0"),
])
async def test_a_body_that_is_not_utf8_is_refused_as_such(agent_client: tuple[Agent, httpx.AsyncClient],
                                                          body: bytes, where: str) -> None:
    # Before: "body must be JSON", though the JSON was fine and its encoding was not.
    _, client = agent_client
    r = await client.post("/v1/marks", content=body, headers={**_auth(CONTROL), "Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"] == f"body is not UTF-8 ({where}); send the JSON in UTF-8"


async def test_a_utf8_body_with_a_byte_order_mark_is_taken(agent_client: tuple[Agent, httpx.AsyncClient]) -> None:
    _, client = agent_client
    body = b"\xef\xbb\xbf" + '{"text": "époque 3"}'.encode()
    r = await client.post("/v1/marks", content=body, headers=_auth(CONTROL))
    assert r.status_code == 201 and r.json()["message"] == "époque 3"


async def test_marks_need_the_control_token(agent_client: tuple[Agent, httpx.AsyncClient]) -> None:
    _, client = agent_client
    assert (await client.post("/v1/marks", json={"text": "a"})).status_code == 401
    r = await client.post("/v1/marks", json={"text": "a"}, headers=_auth(READ))
    assert r.status_code == 403 and "control token" in r.json()["error"]
    assert (await client.post("/v1/marks", content=b"not json", headers=_auth(CONTROL))).status_code == 400


async def test_read_only_agent_refuses_marks(tmp_path: Path) -> None:
    agent = Agent(AgentConfig(agent=AgentSection(node="t", root=str(tmp_path))), collectors={})
    transport = httpx.ASGITransport(app=agent.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        r = await client.post("/v1/marks", json={"text": "a"})
    assert r.status_code == 403 and "read-only" in r.json()["error"]


def test_gpu_processes_are_series_with_identity_labels() -> None:
    from collections import Counter

    from rigmon.agent.metrics import frame_metrics
    from tests.tui.snapshot_apps.record_frames import load_frames

    frame = load_frames("v100-ddp-gpu-3-lost")[22]
    samples = {(s.name, s.labels.get("pid"), s.labels.get("command")): s.value
               for m in frame_metrics(frame, Counter()) for s in m.samples if "process" in s.name}
    assert samples[("rigmon_gpu_process_gpu_mem_bytes", "4242", "python3 train.py")] > 13 * 1024**3
    assert 0 < samples[("rigmon_gpu_process_util_ratio", "4242", "python3 train.py")] <= 1.0
    assert not any("cmdline" in name for name, _, _ in samples)
