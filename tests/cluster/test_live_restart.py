"""The live dashboard across an agent restart, with real agents on 127.0.0.1 and the real client and
store: the old run's firing alarms that the new run did not take over end, saying so; those it
restored go on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from rigmon.agent.agent import Agent
from rigmon.agent.alarm_state import STATE_FILE_NAME
from rigmon.agent.server import make_server
from rigmon.cluster.alarm_events import RESTARTED_WITHOUT
from rigmon.cluster.client import AgentClient, Backoff
from rigmon.cluster.node_store import NodeStore
from rigmon.schema import Alarm
from tests.agent.test_alarm_state import make_agent, settle
from tests.agent.test_alarms import READ, wait_for
from tests.alarms.helpers import T0, FakeClock
from tests.cluster.helpers import file_update


@contextlib.asynccontextmanager
async def served(agent: Agent, port: int = 0) -> AsyncIterator[int]:
    """``agent`` started and served on 127.0.0.1 (``port``, 0: any); yields the port."""
    server = make_server(agent, "127.0.0.1", port)
    agent.start()
    task = asyncio.create_task(server.serve())
    try:
        await wait_for(lambda: server.started)
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        await asyncio.gather(task, return_exceptions=True)
        await agent.stop()


async def follow(client: AgentClient, store: NodeStore) -> None:
    """File the client's updates into ``store`` (runs until cancelled)."""
    async for update in client.follow():
        file_update(store, update)


def hot(alarms: tuple[Alarm, ...]) -> list[tuple[str, str]]:
    """The ``hot`` alarms as (run that raised it, state)."""
    return [(a.id.split("-a")[0], a.state) for a in alarms if a.rule == "hot"]


def shown(store: NodeStore) -> tuple[list[tuple[str, str]], list[tuple[str, str]], int | None]:
    """The store's active and resolved ``hot`` alarms, and the node's alarm count (its ⚠)."""
    assert store.alarm_list is not None
    summary = store.view().summary
    return hot(store.alarm_list.active), hot(store.alarm_list.recent), summary.alarms if summary else None


Shown = tuple[list[tuple[str, str]], list[tuple[str, str]], "int | None"]


async def restart(tmp_path: Path, keep_state: bool, order: str = "frames first") -> tuple[NodeStore, str, str, Shown]:
    """Run A fires ``hot`` (the dashboard follows it and fetches its alarms) and stops; run B starts
    on the same state directory and port, from A's alarm state file or (without ``keep_state``)
    from none, and fires its own ``hot``; then the dashboard fetches B's alarms. ``order``: the
    dashboard follows B's stream from its start (``frames first``), fetches B's alarms before
    following its stream (``answer first``), or follows it only after B's first frames are gone
    from its backfill (``start missed``: a dashboard that lost contact for a while). Returns the
    store, both run ids, and what it showed (`shown`) before that fetch."""
    clock = FakeClock(T0)
    state = tmp_path / "state"
    store = NodeStore("n", "n", clock)
    first, probe = make_agent(state, clock)
    async with served(first) as port:
        client = AgentClient(f"http://127.0.0.1:{port}", READ, backoff=Backoff(0.05, 0.05),
                             backfill_frames=1 if order == "start missed" else 120)
        following = asyncio.create_task(follow(client, store))
        await wait_for(lambda: probe.push is not None)
        for t in (0.0, 10.0, 20.0):
            await settle(first, clock, t, probe, probe=95.0, lug=40.0, link=40.0)
        await wait_for(lambda: store.latest is not None and store.latest.taken_at == T0 + 20)
        store.set_alarms(await client.alarms())
        assert shown(store) == ([(first.run_id, "firing")], [], 1)
        if order != "frames first":
            following.cancel()
    if not keep_state:
        (state / STATE_FILE_NAME).unlink()
    clock.t = T0 + 100.0
    second, probe = make_agent(state, clock)
    async with served(second, port):
        await wait_for(lambda: probe.push is not None)
        for t in (100.0, 110.0, 120.0):
            await settle(second, clock, t, probe, probe=95.0, lug=40.0, link=40.0)
        if order == "answer first":
            store.set_alarms(await client.alarms())
        if order != "frames first":
            following = asyncio.create_task(follow(client, store))
        await wait_for(lambda: store.latest is not None and store.latest.taken_at == T0 + 120)
        before_fetch = shown(store)
        store.set_alarms(await client.alarms())
        if order == "frames first":
            assert shown(store) == before_fetch
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
        await client.aclose()
    return store, first.run_id, second.run_id, before_fetch


def ended_by_the_restart(store: NodeStore, run: str) -> Alarm:
    assert store.alarm_list is not None
    (ended,) = [a for a in store.alarm_list.recent if a.id.startswith(run)]
    assert ended.message.endswith(f"({RESTARTED_WITHOUT})")
    assert ended.resolved_at is not None and T0 + 100 <= ended.resolved_at <= T0 + 120
    return ended


async def test_the_old_runs_alarms_end_when_the_agent_restarted_without_them(tmp_path: Path) -> None:
    # Before: the old run's "hot" stayed firing next to the new run's until the next fetch, and then
    # vanished from the screen: neither active nor resolved, nothing said it had ended or why.
    store, run_a, run_b, _ = await restart(tmp_path, keep_state=False)
    assert store.restarts == 1
    assert shown(store) == ([(run_b, "firing")], [(run_a, "resolved")], 1)
    ended_by_the_restart(store, run_a)


async def test_an_answer_of_the_new_run_before_its_frames_ends_them_too(tmp_path: Path) -> None:
    # The alarm fetch may reach the new agent before the stream does: the old run's alarm must not
    # vanish then, and the new run's own must not be ended when its frames come.
    for order in ("answer first", "start missed"):
        store, run_a, run_b, _ = await restart(tmp_path / order, keep_state=False, order=order)
        assert shown(store) == ([(run_b, "firing")], [(run_a, "resolved")], 1)
        ended_by_the_restart(store, run_a)


async def test_alarms_the_new_run_restored_go_on(tmp_path: Path) -> None:
    # Also when the dashboard did not see the new run's first frame, whose event says what it restored.
    for order in ("frames first", "answer first", "start missed"):
        store, run_a, _, before_fetch = await restart(tmp_path / order, keep_state=True, order=order)
        assert before_fetch == shown(store) == ([(run_a, "firing")], [], 1)
        assert store.alarm_list is not None
        assert not [a for a in store.alarm_list.recent if RESTARTED_WITHOUT in a.message]
