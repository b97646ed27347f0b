"""Every answer of the agent's API is JSON, the router's own 404 and 405 included."""

from __future__ import annotations

from pathlib import Path

import httpx

from rigmon.agent.agent import Agent
from rigmon.config import AgentConfig, AgentSection


async def test_unknown_paths_and_methods_answer_json(tmp_path: Path) -> None:
    agent = Agent(AgentConfig(agent=AgentSection(node="t1", root=str(tmp_path))), collectors={})
    transport = httpx.ASGITransport(app=agent.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        missing = await client.get("/v1/nope")
        assert missing.status_code == 404 and missing.headers["content-type"] == "application/json"
        assert missing.json() == {"error": "Not Found"}
        wrong = await client.post("/v1/info")
        assert wrong.status_code == 405 and wrong.json() == {"error": "Method Not Allowed"}
        assert "GET" in wrong.headers["allow"]
    await agent.stop()
