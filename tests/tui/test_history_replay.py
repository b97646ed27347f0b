"""The history view in a replay: the time cursor above its footer, as on the other screens, and a
chart window that follows the cursor as it plays and seeks (unless panned back)."""

from __future__ import annotations

from pathlib import Path

from rigmon.cluster.replay import Replay, store_key
from rigmon.tui.app import RigmonApp
from rigmon.tui.screens.history import HistoryScreen
from rigmon.tui.widgets.history_chart import HistoryChart
from rigmon.tui.widgets.replay_bar import ReplayBar
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import START_AT
from tests.tui.snapshot_apps.fake_bundle import write_fake_bundle
from tests.tui.snapshot_apps.hostile import screen_lines
from tests.tui.test_history import open_history


async def loaded(screen: HistoryScreen, pilot, end_at: float) -> None:  # type: ignore[no-untyped-def]
    """Wait for the chart of the window ending at ``end_at`` to be drawn."""
    chart = screen.query_one(HistoryChart)
    await wait_for(lambda: chart.window is not None and chart.window.end_at == end_at and screen.history is not None)
    await pilot.pause()


async def test_the_history_view_shows_the_time_cursor_and_follows_it(tmp_path: Path) -> None:
    replay = Replay.open(write_fake_bundle(tmp_path / "bug.tar.gz"))
    app = RigmonApp([], replay=replay, refresh_s=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("space")  # pause
        replay.seek(app.cluster, START_AT + 60)
        app.open_node(store_key(replay.bundle.nodes[1]))
        await pilot.pause()
        screen = await open_history(app, pilot)
        await pilot.pause()
        # Before, the view had no time cursor: the other screens' line, above the footer.
        bar = screen.query_one(ReplayBar)
        assert bar.position == replay.position() and bar.display
        lines = screen_lines(app)[0]
        assert lines[-2].lstrip().startswith("⏸ replay bug.tar.gz"), lines
        assert "2026-01-01 00:01:00 UTC" in lines[-2]
        assert screen.window.end_at == START_AT + 60
        # Seeking moves the window with the cursor (before, it stayed where the view opened).
        await pilot.press("right")
        await loaded(screen, pilot, START_AT + 70)
        assert screen.window.end_at == START_AT + 70
        assert "2026-01-01 00:01:10 UTC" in screen_lines(app)[0][-2]
        assert " to 00:01:10 UTC · " in str(screen.query_one("#history-head").render())
        await pilot.press("left", "left")
        await loaded(screen, pilot, START_AT + 50)
        # Panned back, the window stays as the cursor moves on; the now key follows again.
        await pilot.press("comma")
        panned = screen.window.end_at
        assert panned < START_AT + 50
        await pilot.press("right")
        await pilot.pause()
        assert screen.window.end_at == panned
        await pilot.press("n")
        await loaded(screen, pilot, START_AT + 60)
        # Playing, it follows too.
        await pilot.press("space")
        await wait_for(lambda: screen.window.end_at > START_AT + 60)
        await pilot.press("space")
        assert screen.window.end_at <= replay.at
