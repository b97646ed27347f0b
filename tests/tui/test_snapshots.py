"""SVG snapshots of the cluster, node and alarms screens and of a replay, from seeded fake agents or a
fixed bundle on a frozen clock."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot

from rigmon.cluster.replay import Replay
from rigmon.tui.app import RigmonApp
from tests.tui.snapshot_apps.dashboard import alarms_listed, build, give_alarms, settle
from tests.tui.snapshot_apps.fake_agent import START_AT
from tests.tui.snapshot_apps.fake_bundle import GPU_LOST_AT, write_fake_bundle

THEMES = ["rigmon-dark", "rigmon-light"]


@pytest.mark.parametrize("theme", THEMES)
def test_cluster_screen(snap_compare: Any, theme: str) -> None:
    app, fleet, clock = build(theme)

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(app, fleet, clock, pilot)
        app.clear_notifications()  # the unreachable nodes' toasts; the alarms screen shows them
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


@pytest.mark.parametrize("theme", THEMES)
def test_node_screen(snap_compare: Any, theme: str) -> None:
    app, fleet, clock = build(theme)

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(app, fleet, clock, pilot)
        app.open_node(next(iter(fleet.agents)))
        await pilot.pause()
        app.refresh_screen()
        app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 50), run_before=run_before)


def test_cluster_screen_64_nodes_wide(snap_compare: Any) -> None:
    app, fleet, clock = build(count=64)

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(app, fleet, clock, pilot)
        app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(200, 60), run_before=run_before)


def test_alarms_screen(snap_compare: Any) -> None:
    app, fleet, clock = build()
    give_alarms(fleet)

    async def run_before(pilot: Pilot[None]) -> None:
        await alarms_listed(app, fleet)
        await settle(app, fleet, clock, pilot)
        await pilot.press("a")
        await pilot.pause()
        app.refresh_screen()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(140, 36), run_before=run_before)


def test_replay_at_a_fixed_cursor(snap_compare: Any, tmp_path: Any) -> None:
    replay = Replay.open(write_fake_bundle(tmp_path / "bug.tar.gz"))
    app = RigmonApp([], replay=replay, refresh_s=3600)

    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press("space")
        replay.seek(app.cluster, START_AT + GPU_LOST_AT + 12)
        app.refresh_screen()
        await pilot.pause()
        app.clear_notifications()  # the gpu_lost toast would cover the time cursor
        await pilot.pause()

    assert snap_compare(app, terminal_size=(100, 24), run_before=run_before)
