"""The key line gives up the command palette's key when the screen's own keys need its cells, and takes it back
when the terminal is wide enough for both (`rigmon.tui.key_line.KeyLine`)."""

from __future__ import annotations

from rigmon.tui.app import RigmonApp
from rigmon.tui.key_line import KeyLine
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.peer_paths import fleet_nodes
from tests.tui.snapshot_apps.recorded import build, settle
from tests.tui.test_history_keys import key_line

#: The cluster screen's keys with peer paths (the links key is offered): every one must be whole at 80 columns.
NEEDED = ("⏎ Open node", "h History", "q Quit", "? Help", "a Alarms", "l Links", "e Export", "t Theme")


async def _line_settles(app: RigmonApp, pilot: object, palette: bool) -> str:
    await wait_for(lambda: app.screen.query_one(KeyLine).shows_palette_key == palette)
    for _ in range(3):
        await pilot.pause()  # type: ignore[attr-defined]
    return key_line(app)


async def test_the_cluster_key_line_keeps_every_key_whole_at_80_columns_and_the_palette_key_when_wide() -> None:
    # Before: "⏎ Open node  h History  q Quit  ? Help  a Alarms  l Links  e Export▏^p palette" at 80 columns:
    # Textual's footer docks the palette's key over the keys that do not fit, and `t Theme` was under it.
    app, fleet, _ = build(fleet_nodes())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, fleet, pilot)
        line = await _line_settles(app, pilot, palette=False)
        assert all(key in line for key in NEEDED), line
        assert "palette" not in line, line
        await pilot.resize_terminal(200, 50)
        line = await _line_settles(app, pilot, palette=True)
        assert all(key in line for key in NEEDED) and line.rstrip().endswith("^p palette"), line
        await pilot.resize_terminal(80, 24)
        line = await _line_settles(app, pilot, palette=False)
        assert all(key in line for key in NEEDED), line
        # The palette is still one key away.
        await pilot.press("ctrl+p")
        await wait_for(lambda: type(app.screen).__name__ == "CommandPalette")
