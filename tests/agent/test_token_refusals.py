"""Requests refused for their token are logged by the agent (at most once a minute), naming the client and why:
Prometheus shows only ``401 Unauthorized``, and the agent's log said nothing."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest

from rigmon.agent.agent import Agent
from rigmon.agent.request_guard import (
    TOKEN_REFUSAL_LOG_EVERY_S,
    TokenRefusals,
    refusal_reason,
)
from rigmon.config import AgentConfig, AgentSection

GUARD_LOGGER = "rigmon.agent.request_guard"


def refusals_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == GUARD_LOGGER and r.levelno == logging.WARNING]


async def test_a_scrape_with_a_wrong_token_is_logged_naming_the_client_and_the_path(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = AgentConfig(agent=AgentSection(node="t", root=str(tmp_path)))
    agent = Agent(config, token="the-read-token", collectors={})
    transport = httpx.ASGITransport(app=agent.app(), client=("192.0.2.7", 5000))
    caplog.set_level(logging.WARNING, logger=GUARD_LOGGER)
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        answer = await client.get("/metrics", headers={"Authorization": "Bearer another-nodes-token"})
    assert answer.status_code == 401
    [line] = refusals_logged(caplog)
    assert line.startswith("refused GET /metrics from 192.0.2.7 (401): a bearer token that is not this agent's "
                           "read token"), line
    assert "another-nodes-token" not in line and "the-read-token" not in line


def test_the_reason_tells_a_missing_header_from_another_scheme_and_a_wrong_token() -> None:
    assert refusal_reason(b"").startswith("no Authorization header")
    assert refusal_reason(b"Basic dXNlcjpwdw==") == "an Authorization header that is not 'Bearer TOKEN'"
    assert refusal_reason(b"Bearer nope").startswith("a bearer token that is not this agent's read token")


def test_refusals_are_counted_and_logged_at_most_once_a_minute_for_each_reason(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    refusals = TokenRefusals(clock=lambda: now[0])
    scope = {"type": "http", "method": "GET", "path": "/metrics\n2026 CRITICAL forged", "client": ("192.0.2.9", 1)}
    caplog.set_level(logging.WARNING, logger=GUARD_LOGGER)
    for _ in range(3):
        refusals.note(scope, b"")
    now[0] += TOKEN_REFUSAL_LOG_EVERY_S
    refusals.note(scope, b"")
    refusals.note(scope, b"Bearer wrong")  # another reason: not hidden by the first
    lines = refusals_logged(caplog)
    assert refusals.refused == 5 and len(lines) == 3
    assert "(4 refused since the start" in lines[1] and "a bearer token that is not" in lines[2]
    # The path is the client's text: it writes no line of its own to the log.
    assert all("\n" not in line and "/metrics\\n2026 CRITICAL forged" in line for line in lines)
