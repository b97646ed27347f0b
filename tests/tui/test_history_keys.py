"""The history view's key line at 80 columns: its own keys and the app's that an operator needs there are in sight."""

from __future__ import annotations

import pytest

from rigmon.tui.app import RigmonApp
from rigmon.tui.screens.alarms import AlarmsScreen
from tests.tui.snapshot_apps.hostile import screen_lines
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.recorded import open_node, settle
from tests.tui.test_history import fleet_app, open_history

#: What the key line must show on the history view, by key: its own keys first, then the app's.
NEEDED = ("esc Back", "s Series", "+- Zoom", ",. Pan", "n Now", "q Quit", "? Help")


def key_line(app: RigmonApp) -> str:
    """The footer as drawn now: the screen's last line."""
    lines, _ = screen_lines(app)
    return lines[-1]


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_the_history_key_line_shows_the_keys_an_operator_needs_there_at_80_columns(
        size: tuple[int, int]) -> None:
    # Before: Textual's footer cut the keys that did not fit, the app's first: at 80 columns it read
    # "esc Back  s Series  + Zoom in  - Zoom out  , Earlier  . Later  n No", and neither quit nor help was shown.
    app, fleet, _, _ = fleet_app()
    async with app.run_test(size=size) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        screen = await open_history(app, pilot)
        await pilot.pause()
        await pilot.pause()
        line = key_line(app)
        assert all(key in line for key in NEEDED), line
        assert "^p palette" in line, line
        # The keys the footer leaves out still work: the previous series, the app's theme.
        index = screen.chart_index
        await pilot.press("s")
        await pilot.press("S")
        assert screen.chart_index == index
        theme = app.theme
        await pilot.press("t")
        assert app.theme != theme
        span_s, end_at = screen.window.span_s, screen.window.end_at
        await pilot.press("minus")
        await pilot.press("comma")
        assert screen.window.span_s > span_s and screen.window.end_at < end_at
        # The alarms key, listed on the other screens, works here too.
        await pilot.press("a")
        await wait_for(lambda: isinstance(app.screen, AlarmsScreen))

