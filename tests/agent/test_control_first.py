"""Control endpoints check the control token before saying a feature is off: a client without it
learned from the 404 which of alarms, marks and the guard an agent has."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest

from rigmon.agent.agent import Agent
from rigmon.agent.api import ApiState, build_app
from rigmon.agent.buffer import FrameBuffer
from rigmon.agent.guard.api import guard_routes
from rigmon.config import AgentConfig, AgentSection, GuardSection

READ, CONTROL = "read-t0k", "control-t0k"
#: Every control endpoint, with a body it takes.
CONTROL_POSTS = [("/v1/guard", {"action": "hold"}), ("/v1/marks", {"text": "epoch 3"}),
                 ("/v1/alarms/a-1/ack", {"by": "alice"})]


def _app(token: str | None, control_token: str | None) -> Any:
    """An agent's API with alarms, marks and the guard all switched off."""
    info = cast(Any, lambda: SimpleNamespace(node="n1"))
    state = ApiState(buffer=FrameBuffer(10), info=info, token=token, max_streams=4, max_request_bytes=1 << 16,
                     control_token=control_token, alarms=None, mark=None,
                     extra_routes=guard_routes(None, control_token, token))
    return build_app(state)


async def _post(app: Any, path: str, body: object, token: str | None) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://agent") as client:
        return await client.post(path, json=body, headers=headers)


@pytest.mark.parametrize(("path", "body"), CONTROL_POSTS)
@pytest.mark.parametrize("read_token", [None, READ])
async def test_a_feature_switched_off_is_not_told_without_the_control_token(
        path: str, body: object, read_token: str | None) -> None:
    app = _app(read_token, CONTROL)
    for sent in (None, "wrong-t0k"):
        r = await _post(app, path, body, sent)
        assert r.status_code == 401, (sent, r.text)
        assert "enabled" not in r.text and r.headers["www-authenticate"].startswith("Bearer")
    if read_token is not None:
        r = await _post(app, path, body, read_token)
        assert r.status_code == 403 and "enabled" not in r.text and "control token" in r.json()["error"]
    r = await _post(app, path, body, CONTROL)
    assert r.status_code == 404 and "not enabled" in r.json()["error"]


@pytest.mark.parametrize(("path", "body"), CONTROL_POSTS)
async def test_a_read_only_agent_refuses_control_whatever_is_enabled(path: str, body: object) -> None:
    """Without a control token every control request is 403 read-only (README), a feature off included."""
    app = _app(None, None)
    for sent in (None, CONTROL):
        r = await _post(app, path, body, sent)
        assert r.status_code == 403 and "read-only" in r.json()["error"], r.text


async def test_an_agent_without_the_guard_tells_only_the_control_token(tmp_path: Path) -> None:
    """The agent as served on loopback without a read token: only its control token learns the guard is off."""
    config = AgentConfig(agent=AgentSection(node="t", root=str(tmp_path)), guard=GuardSection(enabled=False))
    agent = Agent(config, control_token=CONTROL, collectors={})
    app = agent.app()
    r = await _post(app, "/v1/guard", {"action": "hold"}, None)
    assert r.status_code == 401 and "guard" not in r.text
    r = await _post(app, "/v1/guard", {"action": "hold"}, CONTROL)
    assert r.status_code == 404 and "[guard] enabled = false" in r.json()["error"]
