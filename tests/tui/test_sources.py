"""Pilot tests of every source on the dashboard, from recorded frames of real collectors on simulator trees."""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console, RenderableType
from textual.widgets import Static

from rigmon.tui.app import RigmonApp
from rigmon.tui.widgets.gpu_group import GpuGroup
from rigmon.tui.widgets.gpu_table import GpuTable
from rigmon.tui.widgets.link_group import LinkGroup
from rigmon.tui.widgets.node_row import NodeRow
from rigmon.tui.widgets.rail_group import RailGroup
from rigmon.tui.widgets.source_group import SourceGroup
from rigmon.tui.widgets.storage_group import StorageGroup
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.record_frames import load_frames
from tests.tui.snapshot_apps.recorded import build, open_node, settle, v100_frames

SIZE = (120, 40)


def text(renderable: RenderableType, width: int = 120) -> str:
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def body_text(group: SourceGroup) -> str:
    return text(group.query_one("#body", Static).content)  # type: ignore[arg-type]


def row_text(app: RigmonApp, name: str) -> str:
    row = next(r for r in app.screen.query(NodeRow) if r.view is not None and r.view.name == name)
    return text(row.render(), row.size.width)


async def test_sag_minimum_shows_to_the_millivolt_on_cluster_and_node_screens() -> None:
    app, fleet, _ = build([("v100", v100_frames(), 60)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        first = row_text(app, "v100").splitlines()[0]
        assert "11.384 V" in first and "3/4" in first
        await open_node(app, next(iter(fleet.agents)), pilot)
        rail = app.screen.query_one(RailGroup)
        lines = body_text(rail).splitlines()
        assert "11.384 V" in lines[0] and lines[0].split()[:2] == ["rail", "min"]
        assert "11.712 V" in lines[1]
        bad = rail.style_of("bad")
        assert "sag" in body_text(rail) and bad.bold


async def test_lost_gpu_row_is_marked_and_rows_are_updated_in_place() -> None:
    frames = load_frames("v100-gpu-lost-rail-sag")
    app, fleet, _ = build([("v100", frames, 15)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        url = next(iter(fleet.agents))
        await open_node(app, url, pilot)
        table = app.screen.query_one(GpuTable)
        uuids = [g.uuid for g in frames[0].readings.gpus]
        assert [k.value for k in table.rows] == uuids
        before = {k.value: table.get_row(k) for k in table.rows}
        assert all(str(cells[2]) == "ok" for cells in before.values())
        # GPU 3 falls off the bus: its row stays, in the lost style; the others change in place.
        fleet.agents[url].publish(45)
        store = app.cluster.nodes[url]
        await wait_for(lambda: store.latest is not None and store.latest.seq == 60)
        app.refresh_screen()
        await pilot.pause()
        await pilot.pause()
        assert [k.value for k in table.rows] == uuids
        lost = table.get_row(uuids[3])
        assert str(lost[2]) == "LOST"
        assert lost[2].style == table.get_component_rich_style("gpu-table--lost", partial=True)  # type: ignore[union-attr]
        assert table.get_component_rich_style("gpu-table--lost", partial=True).bold
        assert str(table.get_row(uuids[0])[3]) != str(before[uuids[0]][3])
        group = app.screen.query_one(GpuGroup)
        assert "1 lost: GPU 3 (0000:1d:00.0)" in body_text(group)
        events = text(group.query_one("#gpu-events", Static).content)  # type: ignore[arg-type]
        assert "gpu_lost" in events and "xid" in events


async def test_degraded_link_and_lagging_array_stand_out() -> None:
    app, fleet, _ = build([("encl", "enclosure-link-10g-array-lagging", 45), ("model", "two-raid0-model-load", 30)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        rows = list(app.screen.query(NodeRow))
        assert [r.view.name for r in rows if r.view] == ["encl", "model"]
        assert "2/3" in row_text(app, "encl").splitlines()[0]
        assert "3/3" in row_text(app, "model").splitlines()[0]
        await open_node(app, rows[0].view.key, pilot)  # type: ignore[union-attr]
        links = body_text(app.screen.query_one(LinkGroup))
        degraded = next(line for line in links.splitlines() if line.lstrip().startswith("0-1 "))
        assert "2x10 = 20 Gb/s" in degraded and "degraded: 20 Gb/s below expected" in degraded
        storage = body_text(app.screen.query_one(StorageGroup))
        md127 = next(line for line in storage.splitlines() if "md127" in line)
        assert "67%" in md127 and "raid0" in md127
        assert "gen4 x4 of gen4 x4" in storage


async def test_degraded_array_members_and_absent_sources() -> None:
    app, fleet, _ = build([("raid", "raid1-member-failed-recovering", 25)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        storage = body_text(app.screen.query_one(StorageGroup))
        assert "degraded" in storage and "faulty" in storage
        gpus = app.screen.query_one(GpuGroup)
        assert body_text(gpus).splitlines()[0] == "not present"
        assert not gpus.query_one(GpuTable).display


async def test_amd_gpus_share_the_table() -> None:
    frames = load_frames("strix-amd-gpu")
    app, fleet, _ = build([("strix", frames, 15)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        assert "1/1" in row_text(app, "strix").splitlines()[0]
        await open_node(app, next(iter(fleet.agents)), pilot)
        table = app.screen.query_one(GpuTable)
        card = frames[0].readings.amd_gpus[0].card
        assert [k.value for k in table.rows] == [f"amd:{card}"]


async def test_stalled_thunderbolt_net_is_marked() -> None:
    frames = load_frames("strix-usb4-thunderbolt-net")
    last = frames[-1]
    stalled = tuple(replace(n, stalled=True) if n.kind == "thunderbolt-net" else n for n in last.readings.net)
    frames = frames[:-1] + [replace(last, readings=replace(last.readings, net=stalled))]
    app, fleet, _ = build([("strix", frames, len(frames))])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        links = body_text(app.screen.query_one(LinkGroup))
        assert "STALLED" in next(line for line in links.splitlines() if "thunderbolt0" in line)
