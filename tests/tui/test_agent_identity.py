"""Another agent answering at a node's URL (the node's agent died, another took its port) is said on the
row, the node screen and in a notification, instead of the row silently taking the other name."""

from __future__ import annotations

import asyncio

import httpx
from textual.widgets import Static

from rigmon.cluster.backoff import Backoff
from rigmon.cluster.client import AgentClient
from rigmon.cluster.config import NodeTarget
from rigmon.cluster.identity import AgentNames
from rigmon.cluster.node_store import NodeStore
from rigmon.schema import AlarmList
from rigmon.tui.app import RigmonApp
from rigmon.tui.screens.cluster import ClusterScreen
from rigmon.tui.screens.node import NodeScreen
from rigmon.tui.widgets.node_row import NodeRow
from rigmon.tui.widgets.node_status import NodeStatus
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import FakeAgent, FakeClock, make_alarm
from tests.tui.snapshot_apps.recorded import open_node
from tests.tui.test_app import SIZE, dashboard
from tests.tui.test_history import open_history

NOTE = "the agent at http://node01.test:9871 now says it is node gpu07 (was node01)"


def test_a_name_change_at_a_url_is_noted_once_and_kept() -> None:
    names = AgentNames()
    assert names.answered("k", "http://node01.test:9871", "node01") is None
    assert names.answered("k", "http://node01.test:9871", "node01") is None  # a reconnect, a restart
    assert names.notes == {}
    assert names.answered("k", "http://node01.test:9871", "gpu07") == NOTE
    assert names.answered("k", "http://node01.test:9871", "gpu07") is None
    assert names.notes == {"k": NOTE}
    assert names.answered("other", "http://b:1", "gpu07") is None  # two URLs, one name: not a change


async def test_another_agent_at_the_url_is_said_on_the_row_the_node_screen_and_a_notification() -> None:
    agent = FakeAgent("node01", frames=5)
    app, clock = dashboard(agent)
    url = agent.url
    async with app.run_test(size=SIZE) as pilot:
        store = app.cluster.nodes[url]
        await wait_for(lambda: store.latest is not None and store.latest.seq == 5)
        # node01's agent is gone; an agent of another node answers on its port.
        agent.node = "gpu07"
        agent.restart()
        agent.publish(3)
        # Its frames go into a store of their own (see the next test).
        await wait_for(lambda: (new := app.cluster.nodes[url].latest) is not None and new.node == "gpu07")
        app.refresh_screen()
        await pilot.pause()
        assert app.agent_names.notes == {url: NOTE}
        assert any(n.message == NOTE and n.severity == "warning" for n in app._notifications)
        screen = app.screen
        assert isinstance(screen, ClusterScreen)
        (row,) = screen.query(NodeRow)
        assert row.note == NOTE and NodeRow.height_for(row.view, None, row.note) == 3
        assert row.view is not None
        third = row._reason(row.view)
        assert third is not None and NOTE in third.plain
        # Out of touch, the row's state line says it after the state.
        clock.advance(10)
        app.refresh_screen()
        await pilot.pause()
        assert row.view.state == "stale" and NodeRow.height_for(row.view, None, row.note) == 2
        state = row._figures(row.view, 200)[1]
        assert state.plain.startswith("stale, last data") and state.plain.endswith(f"; {NOTE}")
        app.selected = url
        await app.switch_mode("node")
        app.refresh_screen()
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        assert app.screen.query_one(NodeStatus).note == NOTE


async def test_another_agent_at_the_url_starts_a_fresh_store_and_keeps_the_note() -> None:
    agent = FakeAgent("node01", frames=5)
    agent.alarms = AlarmList(node="node01", active=(
        make_alarm("node01", 1, "psu_rail_low_warning", "warning", "psu:rail", "rail 11.650 V"),), recent=())
    app, _ = dashboard(agent)
    url = agent.url
    async with app.run_test(size=SIZE) as pilot:
        old = app.cluster.nodes[url]
        await wait_for(lambda: old.latest is not None and old.latest.seq == 5 and old.alarm_list is not None)
        agent.node = "gpu07"
        agent.alarms = AlarmList(node="gpu07", active=(), recent=())
        agent.restart()
        agent.publish(3)

        def store() -> NodeStore:
            return app.cluster.nodes[url]

        await wait_for(lambda: store().latest is not None and store().latest.node == "gpu07"  # type: ignore[union-attr]
                       and store().latest.seq == 3 and store().alarm_list is not None  # type: ignore[union-attr]
                       and store().alarm_list.node == "gpu07")  # type: ignore[union-attr]
        new = store()
        # Trends, held history, restarts and alarms are gpu07's alone, not node01's run on.
        assert new is not old
        assert new.history.seqs() == [1, 2, 3]
        assert new.restarts == 0 and new.gpus_seen == 0
        alarms = new.alarm_list
        assert alarms is not None and not alarms.active and all(a.node == "gpu07" for a in alarms.recent)
        app.refresh_screen()
        await pilot.pause()
        # The note the screen showed stays with the node.
        assert app.agent_names.notes == {url: NOTE}
        (row,) = app.screen.query(NodeRow)
        assert row.note == NOTE and row.view is not None and row.view.name == "gpu07"


async def test_a_history_view_open_across_the_change_draws_the_new_agents_history() -> None:
    # Before: the view kept node01's title, chart and window (its clock read node01's store), and the
    # operator read the other agent's series as the node's current history.
    agent = FakeAgent("node01", frames=5)
    agent.journal = True
    app, _ = dashboard(agent)
    url = agent.url
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: (s := app.cluster.nodes[url].latest) is not None and s.seq == 5)
        await open_node(app, url, pilot)
        screen = await open_history(app, pilot)
        assert screen.history is not None and screen.history.node == "node01"
        assert screen.sub_title == "node01 · history"
        agent.node = "gpu07"
        agent.restart()
        agent.publish(3)
        await wait_for(lambda: screen.history is not None and screen.history.node == "gpu07")
        await pilot.pause()
        assert app.screen is screen
        assert screen.sub_title == "gpu07 · history" and screen.agent_note == NOTE
        assert str(screen.query_one("#history-head", Static).content).startswith(NOTE + "\n")
        # Its window ends at the new agent's newest frame, not at node01's last.
        assert screen.window.end_at == app.cluster.nodes[url].latest.taken_at  # type: ignore[union-attr]


class HeldAlarms:
    """Holds the /v1/alarms answers asked of ``agent`` while it is node ``node`` until ``release`` is set,
    each with the list it had when asked; ``ended``: how many of those requests ended (answered or dropped)."""

    def __init__(self, agent: FakeAgent, node: str) -> None:
        self.agent = agent
        self.node = node
        self.release = asyncio.Event()
        self.asked = 0
        self.ended = 0

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path != "/v1/alarms":
            return await self.agent.handle(request)
        answer = await self.agent.handle(request)
        if self.agent.node != self.node:
            return answer
        self.asked += 1
        try:
            await self.release.wait()
            return answer
        finally:
            self.ended += 1


async def test_an_alarm_poll_of_the_old_agent_answered_after_the_change_is_dropped() -> None:
    # Before: the poll in flight when another agent took the URL filed node01's firing alarm in gpu07's
    # fresh store, shown against the new agent until the next fetch.
    agent = FakeAgent("node01", frames=5)
    agent.alarms = AlarmList(node="node01", active=(
        make_alarm("node01", 1, "psu_rail_low_warning", "warning", "psu:rail", "rail 11.650 V"),), recent=())
    old_polls = HeldAlarms(agent, "node01")
    new_polls = HeldAlarms(agent, "gpu07")
    clock = FakeClock()

    def client(target: NodeTarget) -> AgentClient:
        async def handle(request: httpx.Request) -> httpx.Response:
            return await (new_polls if agent.node == "gpu07" else old_polls).handle(request)
        return AgentClient(target.url, transport=httpx.MockTransport(handle), backoff=Backoff(0.01, 0.02))

    old_polls.release.set()
    app = RigmonApp([NodeTarget(agent.url)], clock=clock, client_factory=client, refresh_s=3600)
    url = agent.url
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.cluster.nodes[url].alarm_list is not None)
        # The next poll of node01 is held on its way back.
        old_polls.release.clear()
        asked = old_polls.asked
        app.followers.alarm_wake[url].set()
        await wait_for(lambda: old_polls.asked > asked)
        agent.node = "gpu07"
        agent.alarms = AlarmList(node="gpu07", active=(), recent=())
        agent.restart()
        agent.publish(3)
        await wait_for(lambda: (s := app.cluster.nodes[url].latest) is not None and s.node == "gpu07")
        new = app.cluster.nodes[url]
        # node01's answer comes (or its poll is ended): either way it is not filed as gpu07's.
        old_polls.release.set()
        await wait_for(lambda: old_polls.ended == old_polls.asked)
        for _ in range(5):
            await pilot.pause()
        assert new.alarm_list is None or new.alarm_list.node == "gpu07"
        # gpu07's own alarms come as soon as asked.
        new_polls.release.set()
        await wait_for(lambda: new.alarm_list is not None and new.alarm_list.node == "gpu07")
        assert not new.alarm_list.active  # type: ignore[union-attr]
        assert app.cluster.nodes[url] is new


async def test_at_80_columns_the_row_says_the_change_in_short_rather_than_cut() -> None:
    # Before: "↳ the agent at http://node01.test:9871 now says it is node gpu07 (was node…", the old name cut.
    agent = FakeAgent("node01", frames=5)
    app, clock = dashboard(agent)
    url = agent.url
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(lambda: (s := app.cluster.nodes[url].latest) is not None and s.seq == 5)
        agent.node = "gpu07"
        agent.restart()
        agent.publish(3)
        await wait_for(lambda: (new := app.cluster.nodes[url].latest) is not None and new.node == "gpu07")
        app.refresh_screen()
        await pilot.pause()
        (row,) = app.screen.query(NodeRow)
        assert row.view is not None and row.size.width < len(f"  ↳ {NOTE}")
        third = row._reason(row.view)
        assert third is not None and third.plain == "  ↳ another agent at the node's URL: now node gpu07 (was node01)"
        # Out of touch, its state line says it in short too.
        clock.advance(10)
        app.refresh_screen()
        await pilot.pause()
        state = row._figures(row.view, 20)[1]
        assert state.plain.endswith("; another agent at the node's URL: now node gpu07 (was node01)"), state.plain
