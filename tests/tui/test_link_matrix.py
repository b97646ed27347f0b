"""Pilot tests of the peer paths on the dashboard: the cluster row's path column, the link matrix, the node box."""

from __future__ import annotations

import io

from msgspec.structs import replace
from rich.console import Console, RenderableType
from textual.widgets import Static

from rigmon.schema import Frame, PeerPathReading
from rigmon.tui.row_columns import path_figure
from rigmon.tui.screens.cluster import ClusterScreen
from rigmon.tui.screens.links import LinkScreen
from rigmon.tui.screens.node import NodeScreen
from rigmon.tui.widgets.cluster_header import ClusterHeader
from rigmon.summary import PathCell
from rigmon.tui.widgets.link_table import LinkTable, cell_text, fit_detail, fit_layout, peer_label, silent_for
from rigmon.tui.widgets.node_row import NodeRow
from rigmon.tui.widgets.peer_path_group import PeerPathGroup, path_state
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.peer_paths import SILENT_FROM, cluster_frames, fleet_nodes
from tests.tui.snapshot_apps.recorded import build, open_node, settle
from tests.tui.snapshot_apps.record_frames import load_frames


def text(renderable: RenderableType, width: int) -> str:
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def table_lines(table: LinkTable) -> list[str]:
    """The table's rows as text, cells joined by ``|``."""
    return ["|".join(cell.plain for cell in table.get_row_at(i)) for i in range(table.row_count)]


async def test_the_cluster_row_shows_the_worst_path_and_the_header_its_column() -> None:
    app, fleet, _ = build(fleet_nodes())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, fleet, pilot)
        rows = {r.view.name: r for r in app.screen.query(NodeRow) if r.view is not None}
        one = text(rows["node01"].render(), rows["node01"].size.width)
        assert "silent" in one and "node02" in one and "tbnet to node02 silent 13 s, HTTP up" in one
        three = text(rows["node03"].render(), rows["node03"].size.width)
        assert "1.8 ms" in three and "roce to node04 p99 1.8 ms, loss 2%" in three
        header = app.screen.query_one(ClusterHeader)
        titles = text(header.render(), header.size.width)
        # At 80 columns CPU gives way to the path; its figure is the worst of the last 60 s, and the
        # title says so, as the rail's (it said "path", an operator read the latest round trip).
        assert " path 60s " in titles and " rail 60s " in titles and "CPU" not in titles
        # The nodes with a silent path come first.
        assert [r.view.name for r in app.screen.query(NodeRow) if r.view][:2] == ["node01", "node02"]


async def test_no_path_column_when_no_node_probes() -> None:
    app, fleet, _ = build([("encl", "enclosure-link-10g-array-lagging", 10)])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, fleet, pilot)
        header = app.screen.query_one(ClusterHeader)
        assert "path" not in text(header.render(), header.size.width)
        assert not any(r.with_paths for r in app.screen.query(NodeRow))
        # No matrix to offer: the key does nothing and the footer does not list it.
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, ClusterScreen)
        assert "links" not in str([b.binding.description.lower() for b in app.screen.active_bindings.values()
                                   if b.enabled])


async def test_l_opens_the_matrix_and_enter_the_node_of_the_row() -> None:
    app, fleet, _ = build(fleet_nodes())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, fleet, pilot)
        assert isinstance(app.screen, ClusterScreen)
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, LinkScreen)
        table = app.screen.query_one(LinkTable)
        lines = table_lines(table)
        assert lines[0].startswith("mgmt|node01|2.5G|")
        roce3 = next(line for line in lines if "|node03|" in line and "100G" in line)
        assert roce3.split("|")[-1].strip() == "1.8 ms▲   2%"
        tbnet = [line for line in lines if "40G" in line]
        assert tbnet[0].startswith("tbnet|node01|") and "silent   13s" in tbnet[0]
        # To roce node03 -> node04 and Enter: node03's screen.
        table.move_cursor(row=lines.index(roce3), column=6)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        assert app.selected is not None and "node03" in app.selected
        await pilot.press("l")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ClusterScreen)


async def test_a_stale_node_is_marked_in_the_matrix() -> None:
    nodes = fleet_nodes(10)
    app, fleet, clock = build(nodes)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, fleet, pilot)
        clock.advance(20)
        for agent in fleet.agents.values():
            if agent.node != "node02":
                agent.publish()
        await pilot.pause()
        await pilot.press("l")
        await pilot.pause()
        app.refresh_screen()
        await pilot.pause()
        lines = table_lines(app.screen.query_one(LinkTable))
        assert any("|node02 stale|" in line for line in lines), lines


def hostile(frame: Frame) -> Frame:
    paths = tuple(replace(p, peer="[/]evil[@click=app.quit]", path="[b]x") for p in frame.readings.peer_paths)
    return replace(frame, readings=replace(frame.readings, peer_paths=paths))


async def test_peer_and_path_names_are_text_not_markup() -> None:
    frames = [hostile(f) for f in cluster_frames("node01", 5)]
    app, fleet, _ = build([("node01", frames, 5)])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, fleet, pilot)
        await pilot.press("l")
        await pilot.pause()
        table = app.screen.query_one(LinkTable)
        assert "[b]x" in table_lines(table)[0]
        assert any("[/]evil" in str(c.label) for c in table.columns.values())
        await open_node(app, next(iter(fleet.agents)), pilot)
        group = app.screen.query_one(PeerPathGroup)
        body = text(group.query_one("#body", Static).content, 100)  # type: ignore[arg-type]
        assert "[/]evil[@click=app.quit]" in body


async def test_the_node_screen_lists_the_paths_and_hides_them_without_probes() -> None:
    app, fleet, _ = build([("node01", cluster_frames("node01", SILENT_FROM + 2), SILENT_FROM + 2),
                           ("encl", load_frames("enclosure-link-10g-array-lagging")[:10], 10)])
    async with app.run_test(size=(120, 50)) as pilot:
        await settle(app, fleet, pilot)
        urls = list(fleet.agents)
        await open_node(app, urls[0], pilot)
        group = app.screen.query_one(PeerPathGroup)
        assert group.display
        body = text(group.query_one("#body", Static).content, 116)  # type: ignore[arg-type]
        assert "node02  tbnet" in body and "silent 3 s" in body
        assert "p50" in body and "jitter" in body
        # The silent path is the node's problem: its box comes first.
        groups = [g for g in app.screen.query("SourceGroup") if g.display]
        assert groups[0] is group
        await open_node(app, urls[1], pilot)
        assert not app.screen.query_one(PeerPathGroup).display
        note = str(app.screen.query_one("#not-present", Static).content)
        assert "Peer paths" not in note


def test_the_matrix_takes_the_loss_where_it_fits() -> None:
    from rigmon.cluster.link_matrix import link_matrix
    from rigmon.cluster.node_view import NodeView
    from rigmon.summary import summarize

    views = [NodeView(n, n, n, "live", None, 0.0, summarize(cluster_frames(n, 3)[-1]))
             for n in ("node01", "node02", "node03", "node04")]
    matrix = link_matrix(views)
    assert fit_detail(matrix, 80) == "loss"
    assert fit_detail(matrix, 50) == "p99"
    cell = matrix.rows[0].cells[1]
    assert cell is not None
    assert cell_text(cell, "p99").strip().endswith("µs")


def test_an_ended_peer_s_title_says_when_only_where_the_loss_figures_keep_their_room() -> None:
    from rigmon.cluster.link_matrix import link_matrix
    from rigmon.cluster.node_view import NodeView
    from rigmon.summary import summarize

    views = [NodeView(n, n, n, "live", None, 0.0, summarize(cluster_frames(n, 3)[-1]))
             for n in ("node01", "node02", "node03", "node04")]
    matrix = link_matrix(views)
    # In a replay, node04's recording ended at 00:01:30.
    ended = {"node04": 90.0}
    assert (peer_label("node04", 90.0), peer_label("node04", 90.0, timed=False), peer_label("node04")) == (
        "node04 ended 00:01:30", "node04 ended", "node04")
    assert fit_layout(matrix, 200, ended_peers=ended) == ("loss", True)
    assert fit_layout(matrix, 80, ended_peers=ended) == ("loss", False)
    assert fit_layout(matrix, 50, ended_peers=ended) == ("p99", False)
    assert fit_layout(matrix, 200) == ("loss", False)


async def test_the_matrix_follows_new_frames_in_place() -> None:
    app, fleet, _ = build([(n, frames, SILENT_FROM - 2) for n, frames, _ in fleet_nodes()])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, fleet, pilot)
        await pilot.press("l")
        await pilot.pause()
        table = app.screen.query_one(LinkTable)
        before = [line for line in table_lines(table) if "40G" in line]
        assert "silent" not in before[0] and "µs" in before[0]
        table.move_cursor(row=2, column=4)
        for agent in fleet.agents.values():
            agent.publish(3)
        await wait_for(lambda: all(s.latest is not None and s.latest.seq == SILENT_FROM + 1
                                   for s in app.cluster.nodes.values()))
        app.refresh_screen()
        await pilot.pause()
        after = [line for line in table_lines(table) if "40G" in line]
        assert "silent    2s" in after[0]
        # Same rows and columns: updated in place, the cursor stays.
        assert table.cursor_coordinate == (2, 4)


def test_a_silent_cell_never_shows_a_loss_that_contradicts_it() -> None:
    """A path silent for 3 s still holds its earlier replies: 20 % of the window lost. The cell said
    ``silent  20%``; it says how long the path has been silent (its newest probes are all lost)."""
    just_gone = PathCell(name="node02/tbnet", peer="node02", path="tbnet", state="silent", loss_pct=20.0,
                         last_reply_age_s=3.2)
    assert cell_text(just_gone, "loss") == "silent    3s"
    assert "20%" not in cell_text(just_gone, "loss")
    never = replace(just_gone, loss_pct=100.0, last_reply_age_s=None)
    assert cell_text(never, "loss") == "silent  100%"
    # The whole window lost: still how long, as the legend promises ("silent 4s: for 4 s"), not 100%.
    long_ago = replace(just_gone, loss_pct=100.0, last_reply_age_s=700.0)
    assert cell_text(long_ago, "loss") == "silent   12m"
    assert [silent_for(s) for s in (0.4, 99.4, 100.0, 3599.0, 7200.0, 10 * 86400.0)] == ["0s", "99s", "2m", "60m",
                                                                                     "2h", "10d"]


def test_a_key_mismatch_and_a_flooded_peer_are_told_apart_from_the_path() -> None:
    cell = PathCell(name="node02/tbnet", peer="node02", path="tbnet", state="silent", loss_pct=100.0,
                    key_mismatch=True)
    assert cell_text(cell, "loss") == "badkey  100%"
    # The cluster row's path column says the same as the matrix.
    assert path_figure(cell) == "badkey" and path_figure(replace(cell, key_mismatch=False)) == "silent"
    flooded = PathCell(name="node02/tbnet", peer="node02", path="tbnet", state="ok", loss_pct=40.0,
                       rtt_p99_us=90.0, peer_flooded=True)
    assert cell_text(flooded, "loss").split() == ["90", "µs?", "40%"]


def test_the_node_box_says_key_mismatch_and_peer_flooded() -> None:
    reading = PeerPathReading(name="node02/tbnet", peer="node02", path="tbnet", address="10.0.0.2", state="silent",
                              last_reply_age_s=4.0)
    assert path_state(reading) == "silent 4 s"
    assert path_state(replace(reading, key_mismatch=True)) == "silent: key mismatch"
    assert path_state(replace(reading, state="ok", peer_flooded=True)) == "ok, peer flooded"


async def test_the_legend_promises_only_what_the_cells_show() -> None:
    """The legend said "silent 4s: for 4 s" while the silent cells said "silent 100%" (or, narrow,
    "silent"): a silent cell says how long where the loss fits, and the legend promises no time where
    it does not."""
    app, fleet, _ = build(fleet_nodes())
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, fleet, pilot)
        await pilot.press("l")
        await pilot.pause()
        table = app.screen.query_one(LinkTable)
        legend = app.screen.query_one("#link-legend", Static)
        silent = [cell.plain for i in range(table.row_count) for cell in table.get_row_at(i) if "silent" in cell.plain]
        assert table.detail == "loss" and silent
        assert all(cell.split()[-1][-1] in "smhd" and "%" not in cell for cell in silent), silent
        assert "silent 4s: for 4 s" in str(legend.content)
        await pilot.resize_terminal(50, 30)
        await pilot.pause()
        await pilot.pause()
        assert table.detail == "p99"
        narrow = [cell.plain.strip() for i in range(table.row_count) for cell in table.get_row_at(i)
                  if "silent" in cell.plain]
        assert narrow and set(narrow) == {"silent"}, narrow
        assert "silent 4s" not in str(legend.content) and "loss" not in str(legend.content).split(";")[0]
        await pilot.resize_terminal(100, 30)
        await pilot.pause()
        await pilot.pause()
        assert "silent 4s: for 4 s" in str(legend.content)
