"""Pilot tests of the dashboard over fake agents: states, resume without holes, keys, themes."""

from __future__ import annotations

from pathlib import Path

from textual import events
from textual.containers import VerticalScroll
from textual.pilot import Pilot

from rigmon.cluster.agent_answers import TOKEN_WHERE
from rigmon.cluster.client import AgentClient, Backoff
from rigmon.cluster.config import NodeTarget
from rigmon.cluster.store import contiguous
from rigmon.tui.app import RigmonApp
from rigmon.tui.screens.cluster import ClusterScreen
from rigmon.tui.screens.help import HelpScreen
from rigmon.tui.screens.node import NodeScreen
from rigmon.tui.widgets.node_row import NodeRow
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import FakeAgent, FakeClock

SIZE = (120, 40)


def dashboard(*agents: FakeAgent, **kw: object) -> tuple[RigmonApp, FakeClock]:
    by_url = {a.url: a for a in agents}
    clock = FakeClock()

    def client(target: NodeTarget) -> AgentClient:
        return AgentClient(target.url, transport=by_url[target.url].transport, backoff=Backoff(0.01, 0.02))

    app = RigmonApp([NodeTarget(a.url) for a in agents], clock=clock, client_factory=client,
                    refresh_s=3600, **kw)  # type: ignore[arg-type]
    return app, clock


def row_states(app: RigmonApp) -> dict[str, str]:
    app.refresh_screen()
    return {r.view.name: r.view.state for r in app.screen.query(NodeRow) if r.view is not None}


async def test_node_goes_stale_and_comes_back() -> None:
    agent = FakeAgent("node01", frames=10)
    app, clock = dashboard(agent)
    async with app.run_test(size=SIZE) as pilot:
        store = app.cluster.nodes[agent.url]
        await wait_for(lambda: store.latest is not None and store.latest.seq == 10)
        await pilot.pause()
        assert row_states(app) == {"node01": "live"}
        clock.advance(5)
        assert row_states(app) == {"node01": "stale"}
        agent.publish()
        await wait_for(lambda: store.latest.seq == 11)  # type: ignore[union-attr]
        await pilot.pause()
        assert row_states(app) == {"node01": "live"}


async def test_history_has_no_hole_after_a_resumed_stream() -> None:
    agent = FakeAgent("node01", frames=30)
    app, clock = dashboard(agent)
    async with app.run_test(size=SIZE):
        store = app.cluster.nodes[agent.url]
        await wait_for(lambda: store.latest is not None and store.latest.seq == 30)
        agent.down = True
        agent.drop_streams()
        await wait_for(lambda: store.error is not None)
        agent.publish(12)  # sampled while the dashboard could not reach the agent
        clock.advance(20)
        assert store.state() == "unreachable"
        agent.down = False
        await wait_for(lambda: store.latest.seq == 42)  # type: ignore[union-attr]
        assert store.history.seqs() == list(range(1, 43))
        assert contiguous(store.history.seqs())
        assert store.state() == "live"


async def test_trouble_is_listed_first_with_its_reason() -> None:
    good = FakeAgent("aaa", frames=3)
    bad = FakeAgent("zzz", frames=3)
    bad.status = 401
    app, _ = dashboard(good, bad)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.cluster.nodes[bad.url].error is not None
                       and app.cluster.nodes[good.url].latest is not None)
        app.refresh_screen()
        await pilot.pause()
        rows = list(app.screen.query(NodeRow))
        assert rows[0].view is not None and rows[0].view.key == bad.url
        assert rows[0].view.state == "refused"
        assert rows[0].view.reason == (f"401 unauthorized: missing or wrong bearer token; no token was sent: "
                                       f"give this agent's read token {TOKEN_WHERE}")


async def test_keys_open_node_go_back_help_theme_and_quit() -> None:
    agents = [FakeAgent(f"node0{i}", frames=5) for i in (1, 2, 3)]
    app, _ = dashboard(*agents)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: all(s.latest is not None for s in app.cluster.nodes.values()))
        app.refresh_screen()
        await pilot.pause()
        await pilot.press("down", "enter")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        assert app.selected == agents[1].url
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ClusterScreen)
        focused = app.focused
        assert isinstance(focused, NodeRow) and focused.view is not None and focused.view.key == agents[1].url
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        before = app.theme
        await pilot.press("t")
        assert app.theme != before and app.theme in app.theme_names
        await pilot.click(NodeRow, offset=(2, 0))
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


def cursor_node(app: RigmonApp) -> str | None:
    focused = app.focused
    return focused.view.name if isinstance(focused, NodeRow) and focused.view is not None else None


def type_at_once(app: RigmonApp, *keys: str) -> None:
    """Keys as a terminal delivers them in one read (tmux send-keys, a fast typist): queued
    together, before the app has handled the first (Pilot.press waits after each)."""
    for key in keys:
        app.post_message(events.Key(key, None))


async def test_cursor_keys_read_together_each_start_where_the_last_left_it() -> None:
    agents = [FakeAgent(f"node0{i}", frames=5) for i in (1, 2, 3, 4)]
    app, _ = dashboard(*agents)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: all(s.latest is not None for s in app.cluster.nodes.values()))
        app.refresh_screen()
        await pilot.pause()
        assert cursor_node(app) == "node01"  # the top row until the operator moves
        await pilot.press("end")
        assert cursor_node(app) == "node04"
        type_at_once(app, "home", "down", "down")
        await pilot.pause()
        assert cursor_node(app) == "node03"
        # The list is re-sorted (node03 to the top) and a key comes before the next redraw:
        # it moves from node03 where it is now, not from the row node03 had.
        screen = app.screen
        assert isinstance(screen, ClusterScreen)
        views = {v.name: v for v in app.cluster.views()}
        screen.show([views[name] for name in ("node03", "node01", "node02", "node04")])
        type_at_once(app, "down", "enter")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        assert app.selected == agents[0].url


async def test_a_node_opened_while_the_app_quits_is_no_crash() -> None:
    """Enter typed together with q: the cluster screen's OpenNode may come after the screens closed."""
    agents = [FakeAgent("node01", frames=5)]
    app, _ = dashboard(*agents)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: all(s.latest is not None for s in app.cluster.nodes.values()))
        await pilot.pause()
    assert not app.screen_stack
    app.open_node(agents[0].url)
    app.action_show_mode("cluster")


async def scrolled_to_its_end(app: RigmonApp, pilot: Pilot[None], url: str) -> VerticalScroll:
    """Open the node at ``url`` once every node has a frame, and scroll its screen to the end."""
    await wait_for(lambda: all(s.latest is not None for s in app.cluster.nodes.values()))
    app.open_node(url)
    await pilot.pause()
    body = app.screen.query_one("#node-body", VerticalScroll)
    # The node screen grows past 24 lines once its full frame has come and been laid out
    # (one pause was not always enough on a busy machine: max_scroll_y read 1).
    await wait_for(lambda: body.max_scroll_y > 5)
    body.scroll_end(animate=False, immediate=True)
    await pilot.pause()
    assert body.scroll_y > 0
    return body


async def test_another_node_opens_at_its_top_and_a_redraw_keeps_the_scroll() -> None:
    agents = [FakeAgent(f"node0{i}", frames=5) for i in (1, 2)]
    app, _ = dashboard(*agents)
    async with app.run_test(size=(80, 24)) as pilot:
        body = await scrolled_to_its_end(app, pilot, agents[0].url)
        bottom = body.scroll_y
        app.refresh_screen()  # the refresh timer: the same node again
        await pilot.pause()
        assert body.scroll_y == bottom
        app.action_show_mode("cluster")
        await pilot.pause()
        app.open_node(agents[1].url)
        await pilot.pause()
        assert app.screen.query_one("#node-body", VerticalScroll) is body
        assert body.scroll_y == 0


async def test_broken_theme_file_is_a_notification(tmp_path: Path) -> None:
    (tmp_path / "good.toml").write_text('name = "good"\nprimary = "#336699"\n')
    (tmp_path / "broken.toml").write_text('name = "broken"\nprimary = "not-a-colour"\n')
    app, _ = dashboard(FakeAgent("node01", frames=1), theme_dir=tmp_path, theme_name="good")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.theme == "good"
        messages = [n.message for n in app._notifications]
        assert any("broken.toml" in m and "not a colour" in m for m in messages)


async def test_a_new_frame_is_drawn_without_waiting_for_the_refresh_timer() -> None:
    busy, quiet = FakeAgent("node01", frames=3), FakeAgent("node02", frames=3)
    app, _ = dashboard(busy, quiet)  # refresh_s=3600: the timer never redraws here
    async with app.run_test(size=SIZE) as pilot:
        stores = [app.cluster.nodes[a.url] for a in (busy, quiet)]
        await wait_for(lambda: all(s.latest is not None and s.latest.seq == 3 for s in stores))
        app.refresh_screen()
        await pilot.pause()
        rows = {r.view.key: r for r in app.screen.query(NodeRow) if r.view is not None}
        quiet_view = rows[quiet.url].view
        busy.publish()
        await wait_for(lambda: stores[0].latest.seq == 4)  # type: ignore[union-attr]
        await wait_for(lambda: rows[busy.url].view is not None and rows[busy.url].view.summary is stores[0].summary)
        # The other node's row keeps its view (same object): it is not drawn again.
        assert rows[quiet.url].view is quiet_view


async def test_a_refresh_timer_firing_after_the_screens_are_gone_draws_nothing() -> None:
    # Under load the refresh timer's callback can run while the app shuts down, after the
    # screen stack is empty: it used to raise ScreenStackError and fail the app's exit.
    app = RigmonApp([NodeTarget("http://127.0.0.1:9")], refresh_s=3600)
    async with app.run_test():
        pass
    assert not app.screen_stack
    app.refresh_screen()
    app.draw_screen()


def test_tune_gc_raises_only_the_young_threshold() -> None:
    import gc

    from rigmon.tui.gc_tuning import GC_YOUNG_THRESHOLD, tune_gc

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 7, 9)
        tune_gc()
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, 7, 9)
    finally:
        gc.set_threshold(*before)


async def test_rows_off_screen_are_painted_when_scrolled_to() -> None:
    agents = [FakeAgent(f"node{i:02d}", frames=3) for i in range(1, 13)]
    app, _ = dashboard(*agents)
    async with app.run_test(size=(100, 14)) as pilot:
        stores = [app.cluster.nodes[a.url] for a in agents]
        await wait_for(lambda: all(s.latest is not None and s.latest.seq == 3 for s in stores))
        app.refresh_screen()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ClusterScreen)
        rows = {r.view.key: r for r in screen.query(NodeRow) if r.view is not None}
        top, bottom = rows[agents[0].url], rows[agents[-1].url]
        for agent in (agents[0], agents[-1]):
            agent.publish()
        await wait_for(lambda: stores[0].latest.seq == 4 and stores[-1].latest.seq == 4)  # type: ignore[union-attr]
        app.refresh_screen()
        await pilot.pause()
        # Both rows hold their node's newest view; only the one on screen was painted with it.
        assert top.view is not None and top.view.summary is stores[0].summary
        assert bottom.view is not None and bottom.view.summary is stores[-1].summary
        assert bottom in screen._unpainted and top not in screen._unpainted
        screen.query_one("#nodes", VerticalScroll).scroll_end(animate=False, immediate=True)
        await pilot.pause()
        await pilot.pause()
        assert bottom not in screen._unpainted
        # What the screen shows of it is its newest view.
        assert "node12" in "".join(s.text for s in app.screen._compositor.render_strips())


async def test_a_dead_node_s_incident_says_so_not_no_trouble() -> None:
    # A healthy node whose PSU tripped: its agent stops answering. The node screen's
    # incident box said "no trouble seen" above the data it last had.
    from rigmon.tui.widgets.timeline import IncidentTimeline

    agent = FakeAgent("node01", frames=10)
    app, clock = dashboard(agent)
    async with app.run_test(size=SIZE) as pilot:
        store = app.cluster.nodes[agent.url]
        await wait_for(lambda: store.latest is not None and store.latest.seq == 10)
        app.open_node(agent.url)
        await pilot.pause()
        story = app.screen.query_one(IncidentTimeline)
        assert not story.now
        agent.down = True
        agent.drop_streams()
        await wait_for(lambda: store.error is not None)
        clock.advance(20)
        app.refresh_screen()
        await pilot.pause()
        assert story.now and story.now[0].level == "bad"
        assert story.now[0].text.startswith("unreachable, last data 20s ago: ")
        assert "no trouble seen" not in str(story.render())
        agent.down = False
        agent.publish()  # back: the incident box has nothing to say again
        await wait_for(lambda: store.latest.seq == 11 and store.state() == "live")  # type: ignore[union-attr]
        app.refresh_screen()
        await pilot.pause()
        assert not story.now


async def test_a_node_whose_client_cannot_be_built_is_unreachable_not_connecting_forever() -> None:
    # `rigmon dash 'http://[::1'`: httpx refuses the URL when the node's client is built. The
    # follow worker died before its first message and the row said "connecting" for good.
    import httpx

    good = FakeAgent("node01", frames=3)

    def client(target: NodeTarget) -> AgentClient:
        if target.url != good.url:
            raise httpx.InvalidURL("Invalid port: ':1'")
        return AgentClient(target.url, transport=good.transport, backoff=Backoff(0.01, 0.02))

    app = RigmonApp([NodeTarget(good.url), NodeTarget("http://[::1")], clock=FakeClock(), client_factory=client,
                    refresh_s=3600)
    async with app.run_test(size=SIZE):
        bad = app.cluster.nodes["http://[::1"]
        await wait_for(lambda: bad.error is not None and bad.alarm_error is not None)
        assert bad.state() == "unreachable"
        assert "InvalidURL: Invalid port" in bad.error  # type: ignore[operator]
        assert app.cluster.nodes[good.url].latest is not None


async def test_opening_the_same_node_again_starts_at_its_incident() -> None:
    # Opened from its alarm after the operator had scrolled it to its events: the node screen
    # opened there, with the incident (what happened, and why) off the top.
    agents = [FakeAgent(f"node0{i}", frames=5) for i in (1, 2)]
    app, _ = dashboard(*agents)
    async with app.run_test(size=(80, 24)) as pilot:
        body = await scrolled_to_its_end(app, pilot, agents[0].url)
        app.action_show_mode("alarms")
        await pilot.pause()
        app.open_node(agents[0].url)
        await pilot.pause()
        await pilot.pause()
        assert app.screen.query_one("#node-body", VerticalScroll) is body
        assert body.scroll_y == 0


async def test_a_slow_usb4_link_is_amber_on_the_cluster_row_and_a_vanished_one_red() -> None:
    """README "Colours": amber for a link below its speed, red for one down. The enclosure's USB4
    link at 20 of 40 Gb/s is up: amber; when the node no longer lists it, it is down: red."""
    from msgspec.structs import replace

    from rigmon.tui.row_columns import figure_level
    from tests.tui.snapshot_apps.record_frames import load_frames

    recorded = load_frames("enclosure-link-10g-array-lagging")[-3:]
    assert [d.link_state for d in recorded[-1].readings.thunderbolt if d.kind == "device"] == ["degraded", "ok"]
    agent = FakeAgent("usb", frames=3, recorded=recorded)
    app, _ = dashboard(agent)
    async with app.run_test(size=SIZE) as pilot:
        store = app.cluster.nodes[agent.url]
        await wait_for(lambda: store.latest is not None and store.latest.seq == 3)
        app.refresh_screen()
        await pilot.pause()
        (row,) = app.screen.query(NodeRow)
        assert row.view is not None and row.view.summary is not None
        assert (row.view.summary.links_healthy, row.view.summary.links_total) == (2, 3)
        assert figure_level("links", row.view.summary) == "warn"
        unplugged = [replace(f, readings=replace(f.readings, thunderbolt=tuple(
            d for d in f.readings.thunderbolt if d.name != "0-1"))) for f in recorded]
        agent.recorded = unplugged
        agent.publish()
        await wait_for(lambda: store.latest is not None and store.latest.seq == 4)
        app.refresh_screen()
        await pilot.pause()
        (row,) = app.screen.query(NodeRow)
        assert row.view is not None and row.view.summary is not None
        assert (row.view.summary.links_healthy, row.view.summary.links_total) == (2, 3)
        assert figure_level("links", row.view.summary) == "bad"
