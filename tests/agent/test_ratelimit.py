"""Per-client rate limit of the agent's API: token buckets, 429 with Retry-After, /healthz exempt."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from rigmon.agent.agent import Agent
from rigmon.agent.ratelimit import RateLimiter, retry_after_header
from rigmon.config import AgentConfig, AgentSection, ConfigError, load_agent_config
from tests.agent.helpers import listening_port


class FakeMonotonic:
    def __init__(self) -> None:
        self.t_s = 100.0

    def __call__(self) -> float:
        return self.t_s


def test_bucket_allows_a_burst_then_the_rate() -> None:
    clock = FakeMonotonic()
    limiter = RateLimiter(2.0, 3, clock)
    assert [limiter.take("a") for _ in range(3)] == [None, None, None]
    wait = limiter.take("a")
    assert wait == pytest.approx(0.5)
    assert limiter.take("b") is None  # another client has its own bucket
    clock.t_s += 0.5
    assert limiter.take("a") is None and limiter.take("a") is not None
    clock.t_s += 60  # refills up to the burst, not beyond
    assert [limiter.take("a") for _ in range(4)].count(None) == 3
    assert retry_after_header(0.01) == "1" and retry_after_header(2.2) == "3"


def test_zero_rate_disables_and_clients_are_bounded() -> None:
    assert RateLimiter(0.0, 1).take("a") is None
    limiter = RateLimiter(1.0, 1, FakeMonotonic(), max_clients=2)
    for key in ("a", "b", "c"):
        assert limiter.take(key) is None
    assert limiter.take("a") is None  # forgotten: starts full again
    assert limiter.take("c") is not None


async def test_agent_answers_429_with_retry_after(tmp_path: Path) -> None:
    config = AgentConfig(agent=AgentSection(node="t", root=str(tmp_path), rate_limit_per_s=1.0, rate_limit_burst=5))
    agent = Agent(config, collectors={})
    transport = httpx.ASGITransport(app=agent.app(), client=("192.0.2.7", 5000))
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        codes = [(await client.get("/v1/info")).status_code for _ in range(7)]
        assert codes == [200] * 5 + [429] * 2
        refused = await client.get("/v1/info")
        assert refused.headers["Retry-After"] == "1" and "too many requests" in refused.json()["error"]
        assert (await client.get("/healthz")).status_code == 200
    other = httpx.ASGITransport(app=agent.app(), client=("192.0.2.8", 5000))
    async with httpx.AsyncClient(transport=other, base_url="http://agent") as client:
        assert (await client.get("/v1/info")).status_code == 200


async def test_limit_applies_before_auth(tmp_path: Path) -> None:
    """Guessing tokens costs as much as anything else."""
    config = AgentConfig(agent=AgentSection(node="t", root=str(tmp_path), rate_limit_per_s=1.0, rate_limit_burst=3))
    agent = Agent(config, token="right", collectors={})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=agent.app()), base_url="http://agent") as client:
        guesses = [(await client.get("/v1/info", headers={"Authorization": f"Bearer guess{i}"})).status_code
                   for i in range(5)]
        assert guesses == [401, 401, 401, 429, 429]
        assert (await client.get("/v1/info", headers={"Authorization": "Bearer right"})).status_code == 429


def test_rate_limit_config_keys(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text("[agent]\nrate_limit_per_s = 5\nrate_limit_burst = 10\n")
    section = load_agent_config(path, environ={}).agent
    assert (section.rate_limit_per_s, section.rate_limit_burst) == (5.0, 10)
    path.write_text("[agent]\nrate_limit_burst = 0\n")
    with pytest.raises(ConfigError, match="rate_limit"):
        load_agent_config(path, environ={})


async def test_a_forwarded_for_header_does_not_buy_a_fresh_bucket(tmp_path: Path) -> None:
    """The limit keys on the connection's address (SECURITY.md: a client behind a proxy shares the
    proxy's bucket). uvicorn's proxy-headers middleware, on by default, trusted X-Forwarded-For from
    127.0.0.1: a local client sending a new address each time was never limited."""
    import asyncio

    from rigmon.agent.server import make_server

    config = AgentConfig(agent=AgentSection(node="t", root=str(tmp_path), rate_limit_per_s=1.0, rate_limit_burst=3))
    agent = Agent(config, collectors={})
    server = make_server(agent, "127.0.0.1", 0)
    task = asyncio.create_task(server.serve())
    try:
        port = await listening_port(server)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            codes = [(await client.get("/v1/info", headers={"X-Forwarded-For": f"198.51.100.{i}"})).status_code
                     for i in range(5)]
        assert codes == [200, 200, 200, 429, 429]
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
