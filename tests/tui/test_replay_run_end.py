"""A replay of a bundle read from a crashed node's journal (`rigmon snapshot --journal`): at its last
frame the node's recording ends, and the screens say whether its agent stopped cleanly (the manifest's
``run_end``), instead of "live" to the end (`rigmon.cluster.recording_end`)."""

from __future__ import annotations

import time
from pathlib import Path

from rigmon.cluster.recording_end import recording_ends, stopped_cleanly
from rigmon.cluster.replay import Replay
from rigmon.cluster.store import ClusterStore
from rigmon.snapshot.command import write_snapshot
from rigmon.snapshot.journal_part import read_journal
from rigmon.tui.app import RigmonApp
from rigmon.tui.screens.node import NodeScreen
from rigmon.tui.widgets.node_row import NodeRow
from tests.agent.journal_frames import T0
from tests.snapshot.test_journal_run_end import _journal
from tests.tui.snapshot_apps.hostile import screen_lines

KEY = "replay:n1"
#: The journal's last frame (`_journal` writes 30, one a second from T0).
LAST_AT = T0 + 29


def journal_replay(tmp_path: Path, *, clean: bool, run_end: bool = True) -> Replay:
    """A replay of a one-node bundle read from a journal whose run stopped cleanly or not; without
    ``run_end``, as an older rigmon's bundle (its manifest says nothing of how the run ended)."""
    state = tmp_path / f"state-{clean}"
    _journal(state, clean=clean)
    part = read_journal(state, 3600)
    if not run_end:
        part.run_end = part.run_clean = None
    return Replay.open(write_snapshot([part], 3600, tmp_path / f"snap-{clean}-{run_end}.tar.gz"))


def clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(at))


def test_the_manifests_run_end_says_whether_the_agent_stopped_cleanly(tmp_path: Path) -> None:
    assert journal_replay(tmp_path, clean=False).stopped_cleanly == {KEY: False}
    assert journal_replay(tmp_path, clean=True).stopped_cleanly == {KEY: True}
    assert journal_replay(tmp_path, clean=False, run_end=False).stopped_cleanly == {}
    assert stopped_cleanly(None) is None and stopped_cleanly({"run_end": "stopped cleanly"}) is None
    assert stopped_cleanly({"run_clean": 1}) is None and stopped_cleanly({"run_clean": False}) is False


def test_a_crashed_nodes_recording_ends_at_its_last_frame(tmp_path: Path) -> None:
    # Before, the cursor never passed the last frame of a bundle of one node: it read "live" to the end.
    replay = journal_replay(tmp_path, clean=False)
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    replay.seek(cluster, LAST_AT - 1)
    assert recording_ends(replay, cluster) == {}
    replay.seek(cluster, replay.end_at)
    assert replay.end_at == LAST_AT
    assert recording_ends(replay, cluster) == {KEY: LAST_AT}
    # An older bundle (no run_end): as before, nothing is said at its end.
    older = journal_replay(tmp_path, clean=False, run_end=False)
    cluster = ClusterStore(older.clock)
    older.attach(cluster)
    older.seek(cluster, older.end_at)
    assert recording_ends(older, cluster) == {}


async def test_the_row_and_the_node_screen_say_the_agent_did_not_stop_cleanly(tmp_path: Path) -> None:
    replay = journal_replay(tmp_path, clean=False)
    app = RigmonApp([], replay=replay, refresh_s=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("space")  # paused
        replay.seek(app.cluster, replay.end_at)
        app.refresh_screen()
        await pilot.pause()
        row = next(iter(app.screen.query(NodeRow)))
        assert row.ended_at == LAST_AT and row.stopped_cleanly is False
        text = "\n".join(screen_lines(app)[0])
        assert f"recording ended {clock(LAST_AT)}, agent did not stop cleanly" in text, text
        assert app.screen.sub_title == "1 node: 1 recording ended"
        await pilot.press("enter")
        await pilot.pause()
        app.refresh_screen()
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        assert app.screen.sub_title == f"n1 · recording ended {clock(LAST_AT)}, agent did not stop cleanly"
        text = "\n".join(screen_lines(app)[0])
        assert "killed, crashed or the node lost" in text, text  # the line wraps at 80 columns


async def test_a_clean_stop_is_said_so(tmp_path: Path) -> None:
    replay = journal_replay(tmp_path, clean=True)
    app = RigmonApp([], replay=replay, refresh_s=3600)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("space")
        replay.seek(app.cluster, replay.end_at)
        app.refresh_screen()
        await pilot.pause()
        text = "\n".join(screen_lines(app)[0])
        assert f"recording ended {clock(LAST_AT)}, agent stopped cleanly" in text, text
