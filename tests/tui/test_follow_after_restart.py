"""A node's follower waiting in its back-off tries again as soon as another request reaches the node's
agent (the alarm poll): an agent restarted on its port is live on its row when the dashboard reaches it,
not at the end of a back-off of up to 15 s. Real agents on 127.0.0.1; the back-off is controlled (a
delay of a second or more never ends by itself), so the tests say what happens in which order, never how long."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from textual.message import Message

import rigmon.tui.app
from rigmon.cluster.client import AgentClient, Backoff
from rigmon.cluster.config import NodeTarget
from rigmon.tui.app import RigmonApp
from rigmon.tui.following import Followers
from rigmon.tui.messages import NodeAlarms, NodeAlarmsFailed, NodeConnected, NodeFailed
from tests.agent.test_alarm_state import make_agent
from tests.agent.test_alarms import READ, wait_for
from tests.alarms.helpers import T0, FakeClock
from tests.cluster.test_live_restart import served

#: Back-off delays from this many seconds on stand for the long ones (the 15 s ceiling): they never end
#: by themselves here, so a follower that tries again did so because something woke it.
LONG_S = 1.0


async def controlled_sleep(delay_s: float) -> None:
    """Short delays pass; a long one waits until cancelled."""
    if delay_s >= LONG_S:
        await asyncio.Event().wait()
    await asyncio.sleep(delay_s)


def followers(posted: list[Message]) -> Followers:
    def client(target: NodeTarget) -> AgentClient:
        return AgentClient(target.url, READ, backoff=Backoff(0.01, 60.0), sleep=controlled_sleep)

    def no_worker(*_: object, **__: object) -> None:
        raise AssertionError("the test runs the workers itself")

    return Followers(client, 0.05, posted.append, no_worker)  # type: ignore[arg-type]


def in_long_backoff(posted: list[Message]) -> bool:
    """The follower's last word is a failure it retries only after a long delay."""
    failed = [m for m in posted if isinstance(m, (NodeFailed, NodeConnected))]
    return bool(failed) and isinstance(failed[-1], NodeFailed) and failed[-1].retry_in_s >= LONG_S


async def run_workers(follow: Followers, target: NodeTarget) -> list[asyncio.Task[None]]:
    follow.alarm_wake[target.url] = asyncio.Event()
    return [asyncio.create_task(follow.follow(target)), asyncio.create_task(follow.watch_alarms(target))]


async def stop(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_the_alarm_poll_reaching_a_restarted_agent_ends_the_followers_back_off(tmp_path: Path) -> None:
    # Before: the row stayed "unreachable" until the back-off (up to 15 s) ran out, while the alarm
    # poll already had the new agent's answer; here that back-off would never have ended.
    clock = FakeClock(T0)
    posted: list[Message] = []
    follow = followers(posted)
    first, _ = make_agent(tmp_path / "state", clock)
    async with served(first) as port:
        target = NodeTarget(f"http://127.0.0.1:{port}", READ)
        tasks = await run_workers(follow, target)
        await wait_for(lambda: any(isinstance(m, NodeConnected) and m.info.run_id == first.run_id for m in posted))
    # The agent is gone: the follower backs off until its delays are long ones.
    await wait_for(lambda: in_long_backoff(posted))
    second, _ = make_agent(tmp_path / "state", clock)
    assert second.run_id != first.run_id
    async with served(second, port):
        await wait_for(lambda: any(isinstance(m, NodeConnected) and m.info.run_id == second.run_id for m in posted))
        await stop(tasks)
    after_failure = posted[max(i for i, m in enumerate(posted) if isinstance(m, NodeFailed)):]
    kinds = [type(m) for m in after_failure]
    # The poll's answer from the new agent came first, then the follower connected to it at once.
    assert NodeAlarms in kinds and kinds.index(NodeAlarms) < kinds.index(NodeConnected)


async def test_an_agent_that_is_really_down_keeps_the_followers_back_off(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    posted: list[Message] = []
    follow = followers(posted)
    agent, _ = make_agent(tmp_path / "state", clock)
    async with served(agent) as port:
        target = NodeTarget(f"http://127.0.0.1:{port}", READ)
        tasks = await run_workers(follow, target)
        await wait_for(lambda: any(isinstance(m, NodeConnected) for m in posted))
    await wait_for(lambda: in_long_backoff(posted))
    tries = sum(isinstance(m, NodeFailed) for m in posted)
    polls = sum(isinstance(m, NodeAlarmsFailed) for m in posted)
    # The alarm poll keeps failing too: nothing wakes the follower.
    await wait_for(lambda: sum(isinstance(m, NodeAlarmsFailed) for m in posted) >= polls + 5)
    await stop(tasks)
    assert sum(isinstance(m, NodeFailed) for m in posted) == tries
    assert in_long_backoff(posted)


class RecordingApp(RigmonApp):
    """The dashboard, recording the follow and alarm messages it handles, in order."""

    # A relative CSS_PATH is read beside the module of the class that sets it: the dashboard's own.
    CSS_PATH = str(Path(rigmon.tui.app.__file__).with_name("rigmon.tcss"))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handled: list[Message] = []

    def on_node_connected(self, message: NodeConnected) -> None:
        self.handled.append(message)
        super().on_node_connected(message)

    def on_node_failed(self, message: NodeFailed) -> None:
        self.handled.append(message)
        super().on_node_failed(message)

    def on_node_alarms(self, message: NodeAlarms) -> None:
        self.handled.append(message)
        super().on_node_alarms(message)


async def test_the_followers_reconnection_wakes_the_alarm_poll_of_a_node_off_screen(tmp_path: Path) -> None:
    # The node is off screen (the cluster screen), its alarms polled every 3 hours here and its failed polls
    # retried after 10 minutes: only the follower's connecting to the restarted agent can ask for its
    # alarms during this test. The follower's own back-off ends when the test says.
    clock = FakeClock(T0)
    backoff_over = asyncio.Event()
    waiting: list[float] = []

    async def gated_sleep(delay_s: float) -> None:
        if delay_s < LONG_S:
            await asyncio.sleep(delay_s)
            return
        waiting.append(delay_s)
        await backoff_over.wait()

    def client(target: NodeTarget) -> AgentClient:
        return AgentClient(target.url, READ, backoff=Backoff(600.0, 600.0), sleep=gated_sleep)

    first, _ = make_agent(tmp_path / "state", clock)
    async with AsyncExitStack() as stack:
        port = await stack.enter_async_context(served(first))
        target = NodeTarget(f"http://127.0.0.1:{port}", READ)
        app = RecordingApp([target], clock=clock, refresh_s=3600, client_factory=client, alarm_poll_s=3600.0)
        async with app.run_test(size=(120, 40)):
            handled = app.handled
            await wait_for(lambda: any(isinstance(m, NodeConnected) for m in handled)
                           and any(isinstance(m, NodeAlarms) for m in handled))
            # The agent goes: the follower waits to try again.
            await stack.aclose()
            await wait_for(lambda: bool(waiting))
            # Started afresh (its state directory emptied): no ``alarm_state_restored`` in its first frame,
            # which would ask for its alarms by itself.
            second, _ = make_agent(tmp_path / "afresh", clock)
            async with served(second, port):
                backoff_over.set()
                await wait_for(lambda: any(isinstance(m, NodeConnected) and m.info.run_id == second.run_id
                                           for m in handled))
                back = next(i for i, m in enumerate(handled) if isinstance(m, NodeConnected)
                            and m.info.run_id == second.run_id)
                # The restarted agent's alarms are asked for as soon as the follower reaches it.
                await wait_for(lambda: any(isinstance(m, NodeAlarms) for m in handled[back:]))
