"""BackgroundAgent: the in-process agent `rigmon dash` starts when it has no node."""

from __future__ import annotations

import httpx

from rigmon.agent.agent import Agent
from rigmon.agent.background import BackgroundAgent
from rigmon.config import AgentConfig, AgentSection


def test_serves_on_a_free_loopback_port_and_stops() -> None:
    local = BackgroundAgent(Agent(AgentConfig(agent=AgentSection(node="here", listen="127.0.0.1:0")), collectors={}))
    url = local.start()
    try:
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")
        assert httpx.get(f"{url}/v1/info", timeout=5).json()["node"] == "here"
    finally:
        local.stop()
    assert not local._thread.is_alive()
