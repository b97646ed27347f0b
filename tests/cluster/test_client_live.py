"""AgentClient against real agents on 127.0.0.1: simulated nodes, a killed and restarted agent,
an agent that wants a token, and a server that answers garbage."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from rigmon.agent.agent import Agent
from rigmon.agent.server import make_server
from rigmon.clock import SystemClock
from rigmon.cluster.agent_answers import TOKEN_WHERE
from rigmon.cluster.client import AgentClient, Backoff, Failed, Sampled, Update
from rigmon.cluster.node_store import NodeStore
from rigmon.config import AgentConfig, AgentSection
from rigmon.sim.rig import running_rig
from tests.agent.helpers import listening_port
from tests.cluster.helpers import file_update

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 30.0


async def follow_until(client: AgentClient, store: NodeStore, done: Callable[[Update], bool]) -> None:
    """File updates into ``store`` until ``done`` says so (bounded)."""

    async def run() -> None:
        async for update in client.follow():
            file_update(store, update)
            if done(update):
                return

    await asyncio.wait_for(run(), WAIT_S)


async def test_follows_simulated_nodes() -> None:
    async with running_rig("healthy", 2, base_port=0) as rr:
        for url, node in zip(rr.urls, rr.rig.nodes):
            client = AgentClient(url)
            store = NodeStore(url, url, SystemClock())
            await follow_until(client, store, lambda u: store.latest is not None and store.latest.seq >= 2)
            await client.aclose()
            assert store.name == node.name
            assert store.state() == "live"
            assert store.summary is not None and store.summary.cpu_pct is not None


@contextlib.asynccontextmanager
async def agent_with_token(token: str) -> AsyncIterator[str]:
    agent = Agent(AgentConfig(agent=AgentSection(node="locked", listen="127.0.0.1:0")), token=token,
                  collectors={})
    server = make_server(agent, "127.0.0.1", 0)
    agent.start()
    task = asyncio.create_task(server.serve())
    try:
        port = await listening_port(server)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await agent.stop()
        await asyncio.gather(task, return_exceptions=True)


async def test_agent_that_wants_a_token() -> None:
    async with agent_with_token("s3cret") as url:
        store = NodeStore(url, url, SystemClock())
        client = AgentClient(url, backoff=Backoff(0.01, 0.01))
        await follow_until(client, store, lambda u: isinstance(u, Failed))
        await client.aclose()
        assert store.state() == "refused"  # it answered, 401
        assert store.error == (f"401 unauthorized: missing or wrong bearer token; no token was sent: give this "
                               f"agent's read token {TOKEN_WHERE}")
        good = AgentClient(url, "s3cret")
        await follow_until(good, store, lambda u: isinstance(u, Sampled))
        await good.aclose()
        assert store.state() == "live" and store.name == "locked"


async def test_server_answering_garbage() -> None:
    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{not json!!")
        await writer.drain()
        writer.close()

    async def not_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"\x00\xffSSH-2.0-OpenSSH\r\n")
        await writer.drain()
        writer.close()

    for handler, reason in ((garbage, "bad answer: not JSON"), (not_http, "protocol error: the answer is not valid HTTP")):
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        store = NodeStore(url, url, SystemClock())
        client = AgentClient(url, backoff=Backoff(0.01, 0.01))
        await follow_until(client, store, lambda u: isinstance(u, Failed))
        await client.aclose()
        server.close()
        assert store.state() == "unreachable"
        assert store.error is not None and store.error.startswith(reason)


def start_sim(port: int, tmp: Path) -> tuple[subprocess.Popen[str], str]:
    """``rigmon sim`` of one node on ``port``, its temporary directory in ``tmp``: this test kills
    it (SIGKILL), which leaves that directory (its tree and journal) behind."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rigmon", "sim", "--nodes", "1", "--base-port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        pytest.fail(f"rigmon sim did not start (exit {proc.wait()})")
    return proc, line.split()[1]


async def test_agent_killed_and_restarted(tmp_path: Path) -> None:
    proc, url = await asyncio.to_thread(start_sim, 0, tmp_path)
    port = int(url.rsplit(":", 1)[1])
    store = NodeStore(url, url, SystemClock())
    client = AgentClient(url, backoff=Backoff(0.05, 0.2))
    restarted: subprocess.Popen[str] | None = None
    try:
        await follow_until(client, store, lambda u: isinstance(u, Sampled))
        first_run = store.latest.run_id  # type: ignore[union-attr]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        await follow_until(client, store, lambda u: isinstance(u, Failed))
        assert store.error is not None
        restarted, _ = await asyncio.to_thread(start_sim, port, tmp_path)
        await follow_until(client, store, lambda u: isinstance(u, Sampled))
        assert store.latest is not None and store.latest.run_id != first_run
        assert store.restarts == 1
        assert store.state() == "live"
    finally:
        await client.aclose()
        for p in (proc, restarted):
            if p is not None and p.poll() is None:
                p.terminate()
                p.wait(10)
