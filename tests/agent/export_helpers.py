"""An agent whose two export slots are held by clients that take nothing (the export tests' set-up)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from rigmon.agent.agent import Agent
from rigmon.agent.server import make_server
from rigmon.config import AgentConfig, AgentSection
from tests.agent.helpers import listening_port
from tests.agent.test_api import Counter
from tests.agent.test_history_stream import FRAMES, stalled_export
from tests.agent.journal_frames import T0, FakeClock


@asynccontextmanager
async def stalled_exports(tmp_path: Path, state: Path) -> AsyncIterator[tuple[int, httpx.AsyncClient,
                                                                              list[socket.socket]]]:
    """An agent on the journal in ``state`` serving on 127.0.0.1, once two exports whose clients take
    nothing hold both its slots: its port, a client of it, and the two connections (closed at the end,
    then the agent stopped)."""
    config = AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path / "root"), state_dir=str(state)))
    agent = Agent(config, clock=FakeClock(T0 + FRAMES), collectors={"counter": Counter()})
    server = make_server(agent, "127.0.0.1", 0)
    serving = asyncio.create_task(server.serve())
    stalled: list[socket.socket] = []
    try:
        port = await listening_port(server)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            stalled += [stalled_export(port), stalled_export(port)]
            for _ in range(1000):  # until both answers hold their slots
                if (await client.get("/v1/snapshot")).status_code == 503:
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("the stalled exports never held both slots")
            yield port, client, stalled
    finally:
        for sock in stalled:
            sock.close()
        server.should_exit = True
        await agent.stop()
        await asyncio.wait_for(serving, 10)
