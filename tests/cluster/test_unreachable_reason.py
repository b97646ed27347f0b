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
from rigmon.cluster.node_store import NodeStore
from rigmon.cluster.store import ClusterStore
from tests.agent.test_alarm_state import make_agent, settle
from tests.agent.test_alarms import READ, wait_for
from tests.alarms.helpers import T0, FakeClock
from tests.cluster.helpers import file_update
from tests.cluster.test_live_restart import served


async def test_clean_agent_stop_reads_in_the_operators_words_and_the_alarm_follows(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    cluster = ClusterStore(clock)
    agent, probe = make_agent(tmp_path / "state", clock)
    reasons: list[str] = []
    first_alarm: list[str] = []

    async def follow(client: AgentClient, store: NodeStore) -> None:
        async for update in client.follow():
            file_update(store, update)
            if isinstance(update, Failed):
                if not reasons or reasons[-1] != update.reason:
                    reasons.append(update.reason)
                if not first_alarm:
                    # The cluster rules see the node's first reason: the alarm starts with it.
                    cluster.evaluate_alarms()
                    first_alarm.extend(a.message for a in cluster.rules.active())

    async with served(agent) as port:
        url = f"http://127.0.0.1:{port}"
        store = cluster.add(url, url)
        client = AgentClient(url, READ, backoff=Backoff(0.05, 0.05))
        task = asyncio.create_task(follow(client, store))
        await settle(agent, clock, 1, probe, cpu=50)
        await wait_for(lambda: store.latest is not None)
        assert cluster.evaluate_alarms() == [] and cluster.rules.active() == ()
    # The agent stopped cleanly: as it shut down it cut its open stream (or ended it), then its
    # port refused connections. The client says both in the operator's words.
    await wait_for(lambda: reasons[-1:] == ["cannot connect: connection refused"])
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await client.aclose()
    # (How a stopping agent ends a stream depends on where it was: mid-answer, it is cut or reset; a
    # connection made as its port closes is reset. Each is said as what it is, never an empty reason.)
    assert reasons[0] in ("agent stopped the connection", "connection lost: connection reset by peer",
                          "cannot connect: connection reset by peer", "cannot connect: connection refused")
    assert set(reasons[1:-1]) <= {"cannot connect: connection reset by peer"}
    assert first_alarm == [f"node t1 unreachable: {reasons[0]}"]
    # Fired after its hold, the alarm says the reason the node row says now.
    clock.t += 11
    cluster.evaluate_alarms()
    (alarm,) = cluster.rules.active()
    assert alarm.state == "firing"
    assert alarm.message == "node t1 unreachable: cannot connect: connection refused"
    # ... and keeps following it (the address now times out).
    store.failed("connect timed out")
    cluster.evaluate_alarms()
    (alarm,) = cluster.rules.active()
    assert alarm.message == "node t1 unreachable: connect timed out"


@pytest.mark.parametrize(("exc", "reason"), [
    (httpx.RemoteProtocolError("Server disconnected without sending a response."), "agent stopped the connection"),
    (httpx.RemoteProtocolError("peer closed connection without sending complete message body (received 3 bytes, "
                               "expected 10)"), "agent stopped the connection"),
    (httpx.RemoteProtocolError("illegal status line: bytearray(b'SSH-2.0')"),
     "protocol error: the answer is not valid HTTP (is a rigmon agent at this URL?): illegal status line: bytearray(b'SSH-2.0')"),
    (httpx.ConnectError("[Errno 111] Connection refused"), "cannot connect: connection refused"),
    (httpx.ConnectError("[Errno -2] Name or service not known"), "cannot connect: name or service not known"),
    (httpx.ReadError(""), "connection lost: the connection broke while reading the answer"),
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


def test_a_reset_says_so_not_an_empty_reason() -> None:
    # Before: "connection lost: " (httpx's ReadError has no text of its own for a reset).
    try:
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except OSError as inner:
            raise httpx.ReadError("") from inner
    except httpx.ReadError as exc:
        assert failure_reason(exc) == "connection lost: connection reset by peer"
