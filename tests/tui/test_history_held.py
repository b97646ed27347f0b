"""The history view of a node whose agent cannot answer charts what the dashboard holds of it, and
says so above the chart; a node the dashboard never heard from still says "no history:"."""

from __future__ import annotations

import time

from textual.widgets import Static

from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import FakeAgent
from tests.tui.snapshot_apps.recorded import open_node, settle
from tests.tui.test_app import SIZE, dashboard
from tests.tui.test_history import fleet_app, history_requests, lowest_rail, open_history


def head(screen) -> str:  # type: ignore[no-untyped-def]
    return str(screen.query_one("#history-head", Static).content)


async def test_a_dead_node_charts_the_frames_this_dashboard_holds() -> None:
    # Before: "no history: cannot connect: connection refused" over an empty screen, although the
    # dashboard held every frame of the node up to its death, the sag and the lost GPU among them.
    app, fleet, agent, _ = fleet_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, agent.url, pilot)
        frames = agent.frames  # as the agent sent them (on its clock)
        agent.down = True
        screen = await open_history(app, pilot)
        assert screen.reason is None and screen.history is not None
        held_s = frames[-1].taken_at - frames[0].taken_at
        last = time.strftime("%H:%M:%S", time.gmtime(frames[-1].taken_at))
        note = f"agent unreachable: showing the {held_s:.0f} seconds this dashboard holds, to {last} UTC"
        assert screen.note == note
        assert head(screen).startswith(note + "\n12 V rail (V)"), head(screen)
        # The held rail minima: the sag the agent's journal would have drawn, and its events.
        assert screen.chart is not None and screen.chart.key == "rail"
        assert screen.plotted is not None and screen.plotted.lowest == lowest_rail(agent) == 11.255
        assert any(e.kind == "gpu_lost" for e in screen.plotted.events)
        # Every series the dashboard holds: each GPU's peaks, over its 300 W limit.
        await pilot.press("s")
        await wait_for(lambda: screen.chart is not None and screen.chart.key == "gpu_power" and screen.history is not None)
        await pilot.pause()
        assert screen.plotted is not None and screen.plotted.highest is not None and screen.plotted.highest > 300.0
        peaks = [g.power_peak_w for f in frames for g in f.readings.gpus if g.power_peak_w is not None]
        assert screen.plotted.highest == max(peaks)
        assert head(screen).startswith("agent unreachable: ")
        # The agent back: the chart is its journal's again, with no note.
        agent.down = False
        count = len(history_requests(agent))
        await pilot.press("n")
        await wait_for(lambda: len(history_requests(agent)) > count and screen.history is not None)
        await pilot.pause()
        assert screen.note is None and head(screen).startswith("GPU power (W)")


async def test_a_node_without_journal_charts_what_the_dashboard_holds_and_says_why() -> None:
    app, fleet, agent, _ = fleet_app(journal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, agent.url, pilot)
        screen = await open_history(app, pilot)
        assert screen.note is not None and screen.note.startswith("no history from the agent (HTTP 404: ")
        assert "this dashboard holds" in screen.note
        assert screen.plotted is not None and screen.plotted.lowest == 11.255


async def test_a_node_never_heard_from_still_says_no_history() -> None:
    app, _, agent, _ = fleet_app()
    agent.down = True
    async with app.run_test(size=(120, 40)) as pilot:
        store = app.cluster.nodes[agent.url]
        await wait_for(lambda: store.error is not None)
        await pilot.pause()
        screen = await open_history(app, pilot)
        assert screen.history is None
        assert head(screen).startswith("no history: no frame from this node yet (")


async def test_a_node_that_dies_while_its_history_is_read_says_so_in_the_title() -> None:
    # Before: the title read "node01 · history" with the node dead for minutes; only the node screen said so.
    agent = FakeAgent("node01", frames=5)
    agent.journal = True
    app, clock = dashboard(agent)
    url = agent.url
    async with app.run_test(size=SIZE) as pilot:
        store = app.cluster.nodes[url]
        await wait_for(lambda: store.latest is not None and store.latest.seq == 5)
        await open_node(app, url, pilot)
        screen = await open_history(app, pilot)
        app.refresh_screen()
        await pilot.pause()
        assert screen.sub_title == "node01 · history"
        agent.down = True
        agent.drop_streams()
        await wait_for(lambda: store.error is not None)
        clock.advance(10)
        app.refresh_screen()
        await pilot.pause()
        assert app.screen is screen and screen.sub_title == "node01 · history · unreachable"
        agent.down = False
        agent.publish()
        await wait_for(lambda: store.latest is not None and store.latest.seq == 6)
        app.refresh_screen()
        await pilot.pause()
        assert screen.sub_title == "node01 · history"
