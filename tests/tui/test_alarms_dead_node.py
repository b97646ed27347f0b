"""The alarms screen with a dead node: its own alarms are what it last said, drawn faint and dated, not current."""

from __future__ import annotations

from rich.text import Text

from rigmon.cluster.client import AgentClient
from rigmon.cluster.config import NodeTarget
from rigmon.schema import AlarmList
from rigmon.tui.app import RigmonApp
from rigmon.tui.messages import NodeConnected
from rigmon.tui.widgets.alarm_table import AlarmTable
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import FakeAgent, FakeClock, make_alarm
from tests.tui.test_alarms import active_rows, detail_text


def faint(text: Text) -> bool:
    return "dim" in str(text.style) or any("dim" in str(span.style) for span in text.spans)


async def test_a_dead_node_s_alarms_read_as_of_their_last_fetch() -> None:
    # Before: node02's gpu_lost read "firing" in full colour long after node02 stopped answering,
    # like node01's current one: an operator took it for the node's state now.
    live, dead = FakeAgent("node01", frames=3), FakeAgent("node02", frames=3)
    for agent in (live, dead):
        agent.alarms = AlarmList(node=agent.node, active=(
            make_alarm(agent.node, 1, "gpu_lost", "critical", "gpu:3", "GPU 3 is lost"),), recent=())
    agents = {a.url: a for a in (live, dead)}
    clock = FakeClock()
    app = RigmonApp([NodeTarget(a.url) for a in (live, dead)], clock=clock, refresh_s=3600,
                    client_factory=lambda t: AgentClient(t.url, transport=agents[t.url].transport))
    async with app.run_test(size=(80, 24)) as pilot:
        stores = app.cluster.nodes
        await wait_for(lambda: all(s.alarm_list is not None for s in stores.values()))
        fetched_at = clock.time()
        dead.down = True
        dead.drop_streams()
        clock.advance(30)
        live.publish()
        await wait_for(lambda: stores[dead.url].state() == "unreachable"
                       and stores[live.url].latest.seq == 4)  # type: ignore[union-attr]
        await pilot.press("a")
        await pilot.pause()
        app.refresh_screen()
        await pilot.pause()
        rows = {r.node: r for r in active_rows(app) if r.source == "node"}
        assert rows["node01"].as_of is None
        assert rows["node02"].as_of == fetched_at
        table = app.screen.query_one("#active-alarms", AlarmTable)
        keys = [r.row_key for r in active_rows(app)]
        cells = {r.node: [table.get_cell(r.row_key, c) for c in ("state", "message", "as_of")]
                 for r in active_rows(app) if r.source == "node"}
        assert [cells["node01"][0].plain, cells["node01"][2].plain] == ["firing", ""]
        assert [cells["node02"][0].plain, cells["node02"][2].plain] == ["firing", "01-01 00:16:40"]
        assert faint(cells["node02"][1]) and not faint(cells["node01"][1])
        # The count above the table does not pass node02's old alarm for a current one.
        summary = str(app.screen.query_one("#alarm-summary").render())
        assert summary.startswith("4 rows · 2 firing: 2 critical (1 as last heard) ·")
        # At 80 columns the as-of time is off-screen (the row is faint): the panel under the tables says it.
        table.move_cursor(row=keys.index(rows["node02"].row_key))
        await pilot.pause()
        assert "firing as last heard 01-01 00:16:40 UTC (node unreachable)" in detail_text(app)


async def test_a_node_back_is_asked_for_its_alarms_at_once() -> None:
    # Before: after an agent came back, its alarms stayed "unknown: cannot connect" until the
    # back-off of the failed fetches ran out (up to 15 s) while the node was live again.
    agent = FakeAgent("node01", frames=3)
    agent.alarms = AlarmList(node=agent.node, active=(), recent=())
    app = RigmonApp([NodeTarget(agent.url)], clock=FakeClock(), refresh_s=3600,
                    client_factory=lambda t: AgentClient(t.url, transport=agent.transport))
    async with app.run_test(size=(80, 24)):
        store = app.cluster.nodes[agent.url]
        await wait_for(lambda: store.alarm_list is not None)
        wake = app.followers.alarm_wake[agent.url]
        wake.clear()
        app.on_node_connected(NodeConnected(agent.url, store.info))  # type: ignore[arg-type]
        assert wake.is_set()
