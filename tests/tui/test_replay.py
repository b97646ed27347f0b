"""Export key and replay under Pilot: a bundle from real agents on loopback plays back into the same stores."""

from __future__ import annotations

import math
import random
from pathlib import Path

from rigmon.cluster.alarm_board import board_view
from rigmon.cluster.config import NodeTarget
from rigmon.cluster.replay import Replay
from rigmon.cluster.node_store import NodeStore
from rigmon.cluster.store import ClusterStore
from rigmon.sim.rig import running_rig
from rigmon.snapshot.bundle import NodePart, frames_gzip, read_bundle, write_bundle
from rigmon.tui.app import RigmonApp
from rigmon.tui.screens.alarms import AlarmsScreen, summary_line
from rigmon.tui.screens.cluster import ClusterScreen
from rigmon.tui.widgets.alarm_table import AlarmTable
from rigmon.tui.widgets.replay_bar import ReplayBar
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import START_AT, make_frame
from tests.tui.snapshot_apps.fake_bundle import FRAMES, write_fake_bundle

SIZE = (120, 40)


def series_by_seq(store: NodeStore) -> dict[int, tuple[float, ...]]:
    """Every filed point: seq -> the values of every series (nan as a marker)."""
    seqs = store.history.seqs()
    columns = [ring.tail() for ring in store.history.series.values()]
    return {seq: tuple(-1.0 if math.isnan(c[i]) else c[i] for c in columns) for i, seq in enumerate(seqs)}


async def test_export_then_replay_reaches_the_same_stores(tmp_path: Path) -> None:
    async with running_rig("undervolt-bus-drop", 2, base_port=0, speed=5, workdir=tmp_path / "rig",
                           interval_s=0.25) as rig:
        live = RigmonApp([NodeTarget(u) for u in rig.urls], refresh_s=0.2, alarm_poll_s=0.5,
                         export_dir=tmp_path / "out")
        async with live.run_test(size=SIZE) as pilot:
            stores = live.cluster.nodes
            await wait_for(lambda: all(s.alarm_list is not None and s.alarm_list.active and len(s.history) >= 20
                                       for s in stores.values()), timeout_s=40)
            await pilot.press("e")
            try:
                await wait_for(lambda: any(n.title == "Exported" for n in live._notifications), timeout_s=30)
            except TimeoutError:
                raise AssertionError([(n.title, n.message) for n in live._notifications]) from None
            live_series = {s.name: series_by_seq(s) for s in stores.values()}
            live_events = {s.name: {e.id: e for e in s.events} for s in stores.values()}
    bundles = list((tmp_path / "out").glob("rigmon-dash-*.tar.gz"))
    svgs = list((tmp_path / "out").glob("rigmon-dash-*.svg"))
    assert len(bundles) == 1 and len(svgs) == 1
    assert svgs[0].read_text().lstrip().startswith("<svg") and "rigmon" in svgs[0].read_text()
    assert bundles[0].with_suffix("").with_suffix(".svg") == svgs[0]
    bundle = read_bundle(bundles[0])
    assert [n["node"] for n in bundle.manifest["nodes"]] == ["node01", "node02"]
    assert all(n["error"] is None and n["frames"] > 0 for n in bundle.manifest["nodes"])

    replay = Replay(bundle, bundles[0].name)
    app = RigmonApp([], replay=replay, refresh_s=3600)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("space")  # pause at the start
        assert not replay.playing
        replay.seek(app.cluster, replay.end_at)
        app.refresh_screen()
        await pilot.pause()
        for node in bundle.nodes:
            store = app.cluster.nodes[f"replay:{node.node}"]
            assert store.history.seqs() == [f.seq for f in node.frames]
            replayed = series_by_seq(store)
            shared = set(replayed) & set(live_series[node.node])
            assert len(shared) > 10
            assert {s: replayed[s] for s in shared} == {s: live_series[node.node][s] for s in shared}
            events = {e.id: e for e in store.events}
            common = set(events) & set(live_events[node.node])
            assert common and all(events[i] == live_events[node.node][i] for i in common)
            assert {e.id for f in node.frames for e in f.events} >= set(events)
            # The live alarms the agent listed are rebuilt from their events.
            assert store.alarm_list is not None and store.alarm_list.active


async def test_replay_keys_move_the_time_cursor(tmp_path: Path) -> None:
    replay = Replay.open(write_fake_bundle(tmp_path / "b.tar.gz"))
    app = RigmonApp([], replay=replay, refresh_s=3600)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("space")
        assert not replay.playing
        at = replay.at
        await pilot.press("right", "right", "shift+right")
        assert replay.at == at + 80
        await pilot.press("left")
        assert replay.at == at + 70
        await pilot.press("right_square_bracket")
        assert replay.speed == 2.0
        bar = app.screen.query_one(ReplayBar)
        assert bar.position is not None and bar.position.at == replay.at and bar.display
        store = app.cluster.nodes["replay:node02"]
        assert store.latest is not None and store.latest.taken_at == START_AT + 71
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AlarmsScreen)
        await pilot.press("right", "right", "right")
        await pilot.pause()
        rows = app.screen.query_one("#active-alarms", AlarmTable).alarms
        # (node03's frames end early: the bundle does not date its pulls, so no node_stale is judged past a node's
        # last frame, see tests/cluster/test_replay_stale.py.)
        assert [(r.node, r.alarm.rule) for r in rows] == [("node02", "gpu_lost")]
        await pilot.press("x")
        await pilot.pause()
        assert any("read-only" in n.message for n in app._notifications)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ClusterScreen)
        assert replay.at == at + 100 and replay.end_at == START_AT + FRAMES


async def test_replay_keys_are_not_offered_live(tmp_path: Path) -> None:
    app = RigmonApp([NodeTarget("http://127.0.0.1:9")], refresh_s=3600)
    async with app.run_test(size=SIZE) as pilot:
        assert app.check_action("seek", (10,)) is False and app.check_action("export", ()) is True
        await pilot.press("space", "right")
        assert not app.screen.query_one(ReplayBar).display


async def test_the_time_cursor_shows_position_and_speed_at_80_columns(tmp_path: Path) -> None:
    # The export key names bundles `rigmon-dash-YYYYmmdd-HHMMSS.tar.gz`: with the date and
    # time that took the whole line at 80 columns and the position and speed were cut off.
    replay = Replay.open(write_fake_bundle(tmp_path / "rigmon-dash-20261127-020836.tar.gz"))
    app = RigmonApp([], replay=replay, refresh_s=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("space", "right_square_bracket")
        app.refresh_screen()
        await pilot.pause()
        bar = app.screen.query_one(ReplayBar)
        line = "".join(segment.text for segment in bar.render_line(0))
        assert len(line.rstrip()) <= 80
        assert line.rstrip().endswith(f"/ {FRAMES - 1} s  x2"), line
        assert "UTC" in line and "●" in line


async def test_seeking_back_and_forth_does_not_toast_a_critical_alarm_again(tmp_path: Path) -> None:
    """node02's rail alarm fires at +40 and resolves at +70. Seeking over it toasts it (and
    rings) once; seeking back before it and forward over it again is no news: no second toast."""
    from tests.tui.snapshot_apps.fake_bundle import ALARM_FIRES

    replay = Replay.open(write_fake_bundle(tmp_path / "b.tar.gz"))
    app = RigmonApp([], replay=replay, refresh_s=3600)
    announced: list[list[str]] = []
    show = app.critical_toast.announce

    def announce(target, rows):  # type: ignore[no-untyped-def]
        if rows:
            announced.append([r.alarm.rule for r in rows])
        show(target, rows)

    app.critical_toast.announce = announce  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        if replay.playing:
            await pilot.press("space")
        replay.seek(app.cluster, START_AT + ALARM_FIRES - 10)
        app.refresh_screen()
        await pilot.press("right")  # +40: the rail alarm fires
        await pilot.pause()
        assert announced == [["psu_rail_low_critical"]]
        await pilot.press("left", "left", "right", "right")  # back before it, and over it again
        await pilot.pause()
        assert replay.at == START_AT + ALARM_FIRES
        assert announced == [["psu_rail_low_critical"]]


async def test_a_critical_toast_leaves_the_time_cursor_in_sight(tmp_path: Path) -> None:
    # Before: the toast of the alarms a replay opens on covered the right half of the time cursor
    # (position and speed) for its 15 s, at 80 columns from the cursor's dot on.
    from textual.widgets._toast import Toast

    from tests.tui.snapshot_apps.fake_bundle import ALARM_FIRES

    replay = Replay.open(write_fake_bundle(tmp_path / "b.tar.gz"))
    app = RigmonApp([], replay=replay, refresh_s=3600)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await pilot.press("space")  # pause
        replay.seek(app.cluster, START_AT + ALARM_FIRES - 5)
        app.refresh_screen()
        await pilot.press("right")  # the rail alarm fires: a critical toast
        await wait_for(lambda: list(app.screen.query(Toast)))
        await pilot.pause()
        toasts = list(app.screen.query(Toast))
        bar = app.screen.query_one(ReplayBar).region
        assert toasts and bar.height == 1
        assert all(not toast.region.overlaps(bar) for toast in toasts), [t.region for t in toasts]


def test_the_alarms_screen_says_clock_skew_is_not_judged_in_a_replay(tmp_path: Path) -> None:
    # node02's clock runs 40 s ahead of node01's: the live dashboard raises clock_skew (it compares
    # each frame's taken_at with when it arrived). A bundle holds only the nodes' own times, and the
    # replay files each frame at its taken_at, so every offset is 0: before, the replay showed
    # "nothing firing" as if the clocks had been checked and found right.
    rng = random.Random(5)
    parts = []
    for node, ahead_s in (("node01", 0.0), ("node02", 40.0)):
        frames = [make_frame(node, f"{node}-run", seq, rng, start_at=START_AT + ahead_s) for seq in range(1, 91)]
        parts.append(NodePart(node=node, source=f"http://{node}:9871", from_at=frames[0].taken_at,
                              to_at=frames[-1].taken_at, latest=frames[-1], frames_gz=frames_gzip(frames),
                              frame_count=len(frames)))
    replay = Replay.open(write_bundle(tmp_path / "b.tar.gz", parts, 600.0, "", created_at=START_AT + 200))
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    for at in range(int(replay.start_at), int(replay.end_at) + 1, 5):
        replay.seek(cluster, at)
        cluster.evaluate_alarms()
    # (node02's frames, 40 s ahead, carry the cursor past node01's last: not judged stale either.)
    assert cluster.rules.active() == ()
    line = summary_line(board_view(cluster, replay.notes)).plain
    assert line == ("nothing firing · clock skew is not judged in a replay (the bundle holds no arrival times) · "
                    "nor staleness after a node's last frame")
    # Live there is no such note.
    assert summary_line(board_view(cluster)).plain == "nothing firing"
