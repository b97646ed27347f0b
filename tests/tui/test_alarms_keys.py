"""The alarms screen's key line at 80 columns: the app's keys after its own are whole, since it does not offer the
key of the screen it is."""

from __future__ import annotations

import pytest

from rigmon.tui.screens.alarms import AlarmsScreen
from rigmon.tui.screens.cluster import ClusterScreen
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.recorded import settle
from tests.tui.test_history import fleet_app
from tests.tui.test_history_keys import key_line

NEEDED = ("x Acknowledge", "esc Back", "q Quit", "? Help", "e Export", "t Theme")


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_the_alarms_key_line_keeps_the_theme_key_whole_at_80_columns(size: tuple[int, int]) -> None:
    # Before: "x Acknowledge  esc Back  q Quit  ? Help  a Alarms  e Export  t Them" at 80 columns.
    app, fleet, _, _ = fleet_app()
    async with app.run_test(size=size) as pilot:
        await settle(app, fleet, pilot)
        await pilot.press("a")
        await wait_for(lambda: isinstance(app.screen, AlarmsScreen))
        await pilot.pause()
        await pilot.pause()
        line = key_line(app)
        assert all(key in line for key in NEEDED), line
        assert "a Alarms" not in line and "^p palette" in line, line
        # The other screens' keys still work there.
        theme = app.theme
        await pilot.press("t")
        assert app.theme != theme
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AlarmsScreen)
        await pilot.press("escape")
        await wait_for(lambda: isinstance(app.screen, ClusterScreen))
