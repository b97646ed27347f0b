"""A real agent in process for fault tests: started on the running loop, queried over ASGI,
with waits bounded in real time."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from rigmon.agent.agent import Agent
from rigmon.collectors import REGISTRY
from rigmon.config import AgentConfig
from rigmon.schema import Event, Frame, decode
from rigmon.typed import from_data

#: Longest real time a fault test waits for the agent to show something.
WAIT_S = 20.0
#: Frames kept in the harness agent's buffer (enough for a whole fault test).
BUFFER_FRAMES = 100_000


@dataclass
class Harness:
    """An agent under test and an HTTP client on its app."""

    agent: Agent
    http: httpx.AsyncClient

    @property
    def frames(self) -> list[Frame]:
        assert self.agent.buffer is not None
        return self.agent.buffer.since(0)

    @property
    def latest(self) -> Frame | None:
        assert self.agent.buffer is not None
        return self.agent.buffer.latest

    def events(self, kind: str | None = None) -> list[Event]:
        return [e for f in self.frames for e in f.events if kind is None or e.kind == kind]

    async def wait_for(self, condition: Callable[[Frame], bool], what: str, timeout_s: float = WAIT_S) -> Frame:
        """The first new frame for which ``condition`` holds (fails after ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        seen = self.latest.seq if self.latest else 0
        while time.monotonic() < deadline:
            for frame in self.agent.buffer.since(seen) if self.agent.buffer else []:
                seen = frame.seq
                if condition(frame):
                    return frame
            await asyncio.sleep(0.02)
        latest = self.latest
        raise AssertionError(f"no frame showed {what}; last collectors: {latest.collectors if latest else None}")

    async def api_alive(self) -> Frame:
        """The API answers and serves a current frame."""
        assert (await self.http.get("/healthz")).json() == {"ok": True}
        response = await self.http.get("/v1/latest")
        assert response.status_code == 200
        return decode(Frame, response.content)


def only(*names: str) -> dict[str, dict[str, bool]]:
    """``[collectors]`` data enabling just ``names``."""
    return {name: {"enabled": name in names} for name in REGISTRY}


def agent_config(root: Path, data: dict[str, object]) -> AgentConfig:
    """An agent configuration over ``root`` from TOML-shaped ``data``.

    The collector timeout is the product's default (5 s), not shorter: on a loaded machine (CI: the
    whole suite on 2 cores, other threads in the process) an ordinary call passes 0.5 s in wall time
    now and then, and is reported hung (a failure and recovery the test did not cause). A test of a
    hang the sampler must find by itself sets its own ``collector_timeout_s``.
    """
    agent = {"node": "faulty", "root": str(root), "interval_s": 0.05, "buffer_frames": BUFFER_FRAMES,
             "rate_limit_per_s": 0.0}
    agent.update(data.pop("agent", {}))  # type: ignore[call-overload]
    return from_data(AgentConfig, {"agent": agent, **data}, strict=True)


@contextlib.asynccontextmanager
async def running_agent(config: AgentConfig, **kwargs: object) -> AsyncIterator[Harness]:
    """Start ``Agent(config, **kwargs)`` on this loop; stop it on exit."""
    agent = Agent(config, **kwargs)  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=agent.app())
    agent.start()
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
            yield Harness(agent, http)
    finally:
        await agent.stop()


def seqs_contiguous(frames: list[Frame]) -> bool:
    return all(b.seq == a.seq + 1 for a, b in zip(frames, frames[1:]))
