"""A replayed node whose recording ends before the others' (a bundle that does not date its pulls): once
the cursor is past its last frame by more than three of its intervals, its row and its node screen say
"recording ended HH:MM:SS", without reading stale (`rigmon.cluster.recording_end`)."""

from __future__ import annotations

import random
from pathlib import Path

from msgspec.structs import replace

from rigmon.cluster.node_view import NodeState, NodeView
from rigmon.cluster.recording_end import recording_ends
from rigmon.cluster.replay import Replay
from rigmon.cluster.store import ClusterStore
from rigmon.schema import Frame
from rigmon.snapshot.bundle import NodePart, frames_gzip, write_bundle
from rigmon.tui.app import RigmonApp
from rigmon.tui.recording_end import in_display_order
from rigmon.tui.screens.node import NodeScreen
from rigmon.tui.widgets.node_row import NodeRow
from rigmon.tui.widgets.node_status import NodeStatus
from tests.tui.snapshot_apps.fake_agent import START_AT, FakeAgent, make_frame
from tests.tui.snapshot_apps.fake_bundle import SILENT_AFTER, write_fake_bundle
from tests.tui.snapshot_apps.hostile import screen_lines

NODE03 = "replay:node03"


def row_of(app: RigmonApp, key: str) -> NodeRow:
    return next(row for row in app.screen.query(NodeRow) if row.view is not None and row.view.key == key)


async def seek(app: RigmonApp, pilot, at: float) -> None:  # type: ignore[no-untyped-def]
    assert app.replay is not None
    app.replay.seek(app.cluster, at)
    app.refresh_screen()
    await pilot.pause()
    app.clear_notifications()  # node02's critical toasts would cover the rows
    await pilot.pause()


async def test_a_node_whose_frames_end_early_reads_recording_ended_not_live_nor_stale(tmp_path: Path) -> None:
    # node03's frames end at +90 s, the others' at +120 s, and the bundle dates no pull. Before, its
    # row read "live" to the end, as at its last frame, and its node screen "last data 0s ago".
    replay = Replay.open(write_fake_bundle(tmp_path / "bug.tar.gz"))
    app = RigmonApp([], replay=replay, refresh_s=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("space")
        # Within three of its intervals of its last frame it is live, as a node between two frames.
        await seek(app, pilot, START_AT + SILENT_AFTER + 2)
        assert row_of(app, NODE03).ended_at is None
        assert not any("recording ended" in line for line in screen_lines(app)[0])
        await seek(app, pilot, START_AT + SILENT_AFTER + 20)
        row = row_of(app, NODE03)
        assert row.ended_at == START_AT + SILENT_AFTER
        lines = screen_lines(app)[0]
        assert any(line.strip() == "recording ended 00:01:30" for line in lines), lines
        assert app.screen.sub_title == "3 nodes: 2 live, 1 recording ended"
        # Listed before the live nodes, as a stale one would be, but not stale: its age stops at its
        # last frame and no cluster rule judges it (its clock may run behind the others').
        assert next(r.view.key for r in app.screen.query(NodeRow) if r.view is not None) == NODE03
        store = app.cluster.nodes[NODE03]
        assert store.state() == "live" and store.age_s() == 0.0
        app.cluster.evaluate_alarms()
        assert [a.rule for a in app.cluster.rules.active()] == []
        # Its node screen says so in its title, its status and its "now".
        await pilot.press("enter")
        await pilot.pause()
        app.refresh_screen()
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        assert app.screen.sub_title == "node03 · recording ended 00:01:30"
        status = app.screen.query_one(NodeStatus)
        assert status.ended_at == START_AT + SILENT_AFTER
        text = "\n".join(screen_lines(app)[0])
        assert "state     recording ended 00:01:30" in text and "0s ago" not in text
        assert "now ▲ recording ended 00:01:30" in text
        # Sought back before its end it is live again.
        await seek(app, pilot, START_AT + 60)
        assert app.screen.sub_title == "node03 · live" and status.ended_at is None


def bundle(tmp_path: Path, nodes: dict[str, tuple[list[Frame], float | None]]) -> Replay:
    """A bundle of ``nodes`` (frames, and when each was pulled by its own clock: ``None``, undated)."""
    parts = [NodePart(node=node, source=f"http://{node}:9871", from_at=frames[0].taken_at, to_at=frames[-1].taken_at,
                      info=FakeAgent(node).info(), latest=frames[-1], frames_gz=frames_gzip(frames),
                      frame_count=len(frames), pulled_at=pulled_at, agent_now_at=pulled_at)
             for node, (frames, pulled_at) in nodes.items()]
    return Replay.open(write_bundle(tmp_path / "b.tar.gz", parts, 600.0, "", created_at=START_AT + 200))


def frames(node: str, last: int, interval_s: float = 1.0) -> list[Frame]:
    rng = random.Random(node)
    return [replace(make_frame(node, f"{node}-run", seq, rng), taken_at=START_AT + seq * interval_s)
            for seq in range(1, last + 1)]


def test_the_end_waits_three_sampling_intervals_and_a_dated_pull_ages_as_recorded(tmp_path: Path) -> None:
    replay = bundle(tmp_path, {"node01": (frames("node01", 120), None), "node02": (frames("node02", 60), None)})
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    replay.seek(cluster, START_AT + 63)
    assert recording_ends(replay, cluster) == {}  # 3 s past: a late frame, not an end
    replay.seek(cluster, START_AT + 64)
    assert recording_ends(replay, cluster) == {"replay:node02": START_AT + 60}
    # Three of its intervals: a node sampling every 10 s is not ended 20 s after its last frame.
    cluster.nodes["replay:node02"].connected(replace(FakeAgent("node02").info(), interval_s=10.0))
    assert recording_ends(replay, cluster) == {}
    replay.seek(cluster, START_AT + 91)
    assert recording_ends(replay, cluster) == {"replay:node02": START_AT + 60}
    # With a dated pull the bundle knows it was watched until then: it ages and reads stale, as recorded.
    dated = bundle(tmp_path, {"node01": (frames("node01", 120), START_AT + 121),
                              "node02": (frames("node02", 60), START_AT + 121)})
    cluster = ClusterStore(dated.clock)
    dated.attach(cluster)
    dated.seek(cluster, START_AT + 100)
    assert recording_ends(dated, cluster) == {} and cluster.nodes["replay:node02"].state() == "stale"


def view_of(key: str, state: NodeState) -> NodeView:
    return NodeView(key=key, name=key, url=key, state=state, reason=None, age_s=0.0, summary=None)


def test_ended_nodes_come_after_the_stale_ones_and_before_the_live() -> None:
    views = [view_of("a", "unreachable"), view_of("b", "stale"), view_of("c", "live"), view_of("d", "live")]
    assert [v.key for v in in_display_order(views, {"d": START_AT})] == ["a", "b", "d", "c"]
    assert in_display_order(views, {}) == views
