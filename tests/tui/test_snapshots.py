"""SVG snapshots of the cluster and node screens, from seeded fake agents on a frozen clock."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot

from tests.tui.snapshot_apps.dashboard import build, settle

THEMES = ["rigmon-dark", "rigmon-light"]


@pytest.mark.parametrize("theme", THEMES)
def test_cluster_screen(snap_compare: Any, theme: str) -> None:
    app, fleet, clock = build(theme)

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(app, fleet, clock, pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


@pytest.mark.parametrize("theme", THEMES)
def test_node_screen(snap_compare: Any, theme: str) -> None:
    app, fleet, clock = build(theme)

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(app, fleet, clock, pilot)
        app.open_node(next(iter(fleet.agents)))
        await pilot.pause()
        app.refresh_screen()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 50), run_before=run_before)


def test_cluster_screen_64_nodes_wide(snap_compare: Any) -> None:
    app, fleet, clock = build(count=64)

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(app, fleet, clock, pilot)

    assert snap_compare(app, terminal_size=(200, 60), run_before=run_before)
