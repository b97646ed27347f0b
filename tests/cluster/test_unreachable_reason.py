"""A node whose agent stops cleanly, seen by the real client and the cluster rules: the failure
reasons are in the operator's words, and the ``node_unreachable`` alarm says the node's current
reason, not the first one it fired with."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from rigmon.cluster.agent_answers import failure_reason
from rigmon.cluster.client import AgentClient, Backoff, Failed
from rigmon.cluster.store import ClusterStore
from tests.agent.test_alarm_state import make_agent, settle
from tests.agent.test_alarms import READ, wait_for
from tests.alarms.helpers import T0, FakeClock
from tests.cluster.test_live_restart import follow, served


async def test_clean_agent_stop_reads_in_the_operators_words_and_the_alarm_follows(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    cluster = ClusterStore(clock)
    agent, probe = make_agent(tmp_path / "state", clock)
    reasons: list[str] = []
    async with served(agent) as port:
        url = f"http://127.0.0.1:{port}"
        store = cluster.add(url, url)
        client = AgentClient(url, READ, backoff=Backoff(0.05, 0.05))
        task = asyncio.create_task(follow(client, store))
        await settle(agent, clock, 1, probe, cpu=50)
        await wait_for(lambda: store.latest is not None)
        assert cluster.evaluate_alarms() == [] and cluster.rules.active() == ()
    # The agent stopped cleanly (its streams closed as it shut down): the client says so.
    await wait_for(lambda: store.error is not None)
    reasons.append(store.error or "")
    cluster.evaluate_alarms()
    await wait_for(lambda: store.error != reasons[0])
    reasons.append(store.error or "")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await client.aclose()
    assert reasons == ["agent stopped the connection", "cannot connect: connection refused"]
    # Fired with the first reason, the alarm says the one the node row says now.
    (pending,) = cluster.rules.active()
    assert pending.state == "pending" and pending.message.endswith("unreachable: agent stopped the connection")
    clock.t += 11
    cluster.evaluate_alarms()
    (alarm,) = cluster.rules.active()
    assert alarm.state == "firing"
    assert alarm.message.endswith("unreachable: cannot connect: connection refused")
    # ... and keeps following it (the address came back, and now times out).
    store.failed("connect timed out")
    cluster.evaluate_alarms()
    (alarm,) = cluster.rules.active()
    assert alarm.message.endswith("unreachable: connect timed out")


@pytest.mark.parametrize(("exc", "reason"), [
    (httpx.RemoteProtocolError("Server disconnected without sending a response."), "agent stopped the connection"),
    (httpx.RemoteProtocolError("peer closed connection without sending complete message body (received 3 bytes, "
                               "expected 10)"), "agent stopped the connection"),
    (httpx.RemoteProtocolError("illegal status line: bytearray(b'SSH-2.0')"),
     "connection lost: illegal status line: bytearray(b'SSH-2.0')"),
    (httpx.ConnectError("[Errno 111] Connection refused"), "cannot connect: connection refused"),
    (httpx.ConnectError("[Errno -2] Name or service not known"), "cannot connect: name or service not known"),
])
def test_failure_reasons(exc: Exception, reason: str) -> None:
    assert failure_reason(exc) == reason


def test_connect_error_says_the_cause_not_all_attempts_failed() -> None:
    try:
        try:
            raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 1)")
        except OSError as inner:
            raise OSError("All connection attempts failed") from inner
    except OSError as os_error:
        exc = httpx.ConnectError("All connection attempts failed")
        exc.__cause__ = os_error
    assert failure_reason(exc) == "cannot connect: connection refused"
