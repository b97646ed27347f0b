"""AgentClient's alarms: /v1/alarms, acknowledging with the control token, refusals as reasons, the watch loop."""

from __future__ import annotations

import asyncio

import pytest

from rigmon.cluster.client import AgentClient, AgentError, Failed
from rigmon.schema import AlarmList
from tests.tui.snapshot_apps.fake_agent import FakeAgent, make_alarm


def agent_with_alarms(control_token: str | None = "ctl") -> FakeAgent:
    agent = FakeAgent("node01", frames=1)
    agent.alarms = AlarmList(node="node01", control=control_token is not None, active=(
        make_alarm("node01", 1, "gpu_lost", "critical", "gpu:3", "GPU 3 lost"),), recent=())
    agent.control_token = control_token
    return agent


async def test_alarms_are_decoded() -> None:
    agent = agent_with_alarms()
    listed = await AgentClient(agent.url, transport=agent.transport).alarms()
    assert listed == agent.alarms


@pytest.mark.parametrize(("agent_token", "client_token", "status", "reason"), [
    ("ctl", "wrong", 401, "401 unauthorized: missing or wrong control token"),
    (None, "ctl", 403, "403 forbidden: this agent is read-only: no control token is configured"),
    ("ctl", None, 403, "no control token for this node in the dashboard configuration"),
])
async def test_refused_acknowledgements_say_why(agent_token: str | None, client_token: str | None, status: int,
                                                reason: str) -> None:
    agent = agent_with_alarms(agent_token)
    client = AgentClient(agent.url, "read-token", control_token=client_token, transport=agent.transport)
    with pytest.raises(AgentError) as caught:
        await client.acknowledge("node01-run1-a1", "alice")
    assert (caught.value.status, caught.value.reason) == (status, reason)


async def test_acknowledge_sends_the_control_token_not_the_read_token() -> None:
    agent = agent_with_alarms()
    client = AgentClient(agent.url, "read-token", control_token="ctl", transport=agent.transport)
    alarm = await client.acknowledge("node01-run1-a1", "alice")
    assert alarm.acknowledged_by == "alice" and alarm.acknowledged_at is not None
    assert agent.requests[-1].headers["authorization"] == "Bearer ctl"
    with pytest.raises(AgentError, match="404: no alarm nope"):
        await client.acknowledge("nope", "alice")


async def test_watch_fetches_on_wake_and_reports_failures() -> None:
    agent = agent_with_alarms()
    client = AgentClient(agent.url, transport=agent.transport)
    wake = asyncio.Event()
    seen: list[AlarmList | Failed] = []

    async def run() -> None:
        async for item in client.watch_alarms(wake, interval_s=3600):
            seen.append(item)
            if len(seen) == 1:
                agent.status = 500
                wake.set()  # an alarm event arrived: fetch now, not in an hour
            elif len(seen) == 2:
                agent.status = None
                wake.set()
            else:
                return

    await asyncio.wait_for(run(), 5)
    assert isinstance(seen[0], AlarmList) and isinstance(seen[2], AlarmList)
    assert isinstance(seen[1], Failed) and seen[1].reason == "HTTP 500: agent failed"


async def test_agent_without_alarms_is_a_failure_not_a_crash() -> None:
    agent = FakeAgent("node01")
    with pytest.raises(AgentError) as caught:
        await AgentClient(agent.url, transport=agent.transport).alarms()
    assert caught.value.status == 404


async def test_a_failed_fetch_is_retried_on_the_backoff_not_a_poll_interval_later() -> None:
    # The fetch an alarm event asked for fails once (a busy agent timing out): the retry must
    # not wait for the next poll (30 s for a node off screen), or the alarm count stays behind.
    agent = agent_with_alarms()
    agent.status = 500
    client = AgentClient(agent.url, transport=agent.transport)
    wake = asyncio.Event()
    seen: list[AlarmList | Failed] = []

    async def run() -> None:
        async for item in client.watch_alarms(wake, interval_s=3600):
            seen.append(item)
            if isinstance(item, Failed):
                assert item.retry_in_s < 3600
                agent.status = None
            else:
                return

    await asyncio.wait_for(run(), 10)
    assert isinstance(seen[0], Failed) and isinstance(seen[-1], AlarmList)
