"""A replay's key line at 80 columns: its seek keys are one item, so the help key stays whole on every screen."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.cluster.replay import Replay
from rigmon.tui.app import RigmonApp
from rigmon.tui.screens.alarms import AlarmsScreen
from rigmon.tui.screens.cluster import ClusterScreen
from rigmon.tui.screens.node import NodeScreen
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_bundle import write_fake_bundle
from tests.tui.test_history_keys import key_line


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_the_help_key_is_whole_on_every_screen_of_a_replay(tmp_path: Path, size: tuple[int, int]) -> None:
    # Before: "⏎ Open node  ← -10s  → +10s  h History  space Play/pause  q Quit  ?" at 80 columns, and "? H" on
    # the alarms screen: the help key, which lists the speed keys, was cut.
    replay = Replay.open(write_fake_bundle(tmp_path / "b.tar.gz"))
    app = RigmonApp([], replay=replay, refresh_s=3600)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        lines = {}
        await wait_for(lambda: isinstance(app.screen, ClusterScreen))
        await pilot.pause()
        lines["cluster"] = key_line(app)
        await pilot.press("a")
        await wait_for(lambda: isinstance(app.screen, AlarmsScreen))
        await pilot.pause()
        lines["alarms"] = key_line(app)
        await pilot.press("escape")
        await wait_for(lambda: isinstance(app.screen, ClusterScreen))
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, NodeScreen))
        await pilot.pause()
        lines["node"] = key_line(app)
        for screen, line in lines.items():
            assert all(key in line for key in ("←→ Seek", "space Play", "q Quit", "? Help")), (screen, line)
        # The keys still do what they did, the pair and those the line leaves to the help screen.
        await pilot.press("space")
        assert not replay.playing
        at = replay.at
        await pilot.press("right", "right", "left", "shift+right")
        assert replay.at == at + 70
        await pilot.press("right_square_bracket")
        assert replay.speed == 2.0
