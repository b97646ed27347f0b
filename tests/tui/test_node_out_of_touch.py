"""The node screen of a node the dashboard lost: its last figures faint, and since when it has no data."""

from __future__ import annotations

import io
import re
import time

from rich.console import Console
from textual.widget import Widget

from rigmon.tui.widgets.collector_health import CollectorHealth
from rigmon.tui.widgets.host_group import HostGroup
from rigmon.tui.widgets.node_status import NodeStatus
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import FakeAgent
from tests.tui.test_app import SIZE, dashboard


def status_text(status: NodeStatus) -> str:
    console = Console(width=status.content_size.width, record=True, color_system=None, file=io.StringIO())
    console.print(status.render())
    return console.export_text()


def drawn_colours(widget: Widget) -> set[str]:
    """The foreground colours of what ``widget`` draws on screen now (its box's borders and text)."""
    region = widget.region
    strips = widget.screen._compositor.render_strips()
    colours = set()
    for y in range(region.y, region.bottom):
        for segment in strips[y].crop(region.x, region.right):
            if segment.text.strip() and segment.style is not None and segment.style.color is not None:
                colours.add(str(segment.style.color.triplet))
    return colours


async def test_a_dead_node_s_boxes_are_faint_and_its_status_dates_the_last_data() -> None:
    # Before: the node screen of an agent killed 20 s ago drew its CPU, network and collectors in
    # full colour, like a live node's (only the cluster row drew them faint), and the status said
    # "last data 20s ago", then "2h ago" after two hours, never since when.
    agent = FakeAgent("node01", frames=10)
    app, clock = dashboard(agent)
    async with app.run_test(size=SIZE) as pilot:
        store = app.cluster.nodes[agent.url]
        await wait_for(lambda: store.latest is not None and store.latest.seq == 10)
        app.open_node(agent.url)
        await pilot.pause()
        host, health = app.screen.query_one(HostGroup), app.screen.query_one(CollectorHealth)
        live = drawn_colours(host), drawn_colours(health)
        last_at = store.received_wall_at
        agent.down = True
        agent.drop_streams()
        await wait_for(lambda: store.error is not None)
        clock.advance(20)
        app.refresh_screen()
        await pilot.pause()
        assert store.state() == "unreachable"
        faint = drawn_colours(host), drawn_colours(health)
        assert live[0] and faint[0] and not live[0] & faint[0]
        assert live[1] and faint[1] and not live[1] & faint[1]
        assert last_at is not None
        stamp = re.escape(f"({time.strftime('%m-%d %H:%M:%S', time.gmtime(last_at))} UTC)")
        assert re.search(r"last data +20s ago " + stamp, status_text(app.screen.query_one(NodeStatus)))
        agent.down = False
        agent.publish()  # back: drawn as current again
        await wait_for(lambda: store.latest.seq == 11 and store.state() == "live")  # type: ignore[union-attr]
        app.refresh_screen()
        await pilot.pause()
        assert drawn_colours(host) & live[0]
        assert re.search(r"last data +0s ago\s*$", status_text(app.screen.query_one(NodeStatus)), re.M)
