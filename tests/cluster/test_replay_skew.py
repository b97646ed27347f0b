"""A bundle that dates each node's pull (its agent's clock and the puller's) replays each node on its own
clock: a node whose clock ran ahead plays in step with the others and makes none of them stale, while a
node that stalled long before its pull reads stale, as it was."""

from __future__ import annotations

import random
from pathlib import Path

from rigmon.cluster.alarm_board import board_view
from rigmon.cluster.export import replay_parts
from rigmon.cluster.replay import NOT_JUDGED, Replay
from rigmon.cluster.store import ClusterStore
from rigmon.schema import Frame
from rigmon.snapshot.bundle import NodePart, frames_gzip, write_bundle
from tests.cluster.test_replay_stale import play
from tests.tui.snapshot_apps.fake_agent import START_AT, make_frame

#: When the puller asked every node (its own clock): just after their 90th frame.
PULLED_AT = START_AT + 90.4


def frames(node: str, seqs: range, ahead_s: float = 0.0) -> list[Frame]:
    rng = random.Random(node)
    return [make_frame(node, f"{node}-run", seq, rng, start_at=START_AT + ahead_s) for seq in seqs]


def part(node: str, recorded: list[Frame], ahead_s: float | None = 0.0) -> NodePart:
    """The node's part, pulled at `PULLED_AT` from an agent whose clock ran ``ahead_s`` (``None``: a
    bundle that does not date the pull, as an older rigmon wrote it)."""
    return NodePart(node=node, source=f"http://{node}:9871", from_at=recorded[0].taken_at,
                    to_at=recorded[-1].taken_at, latest=recorded[-1], frames_gz=frames_gzip(recorded),
                    frame_count=len(recorded), pulled_at=None if ahead_s is None else PULLED_AT,
                    agent_now_at=None if ahead_s is None else PULLED_AT + ahead_s)


def replay_of(path: Path, parts: list[NodePart]) -> tuple[Replay, ClusterStore]:
    replay = Replay.open(write_bundle(path, parts, 600.0, "", created_at=START_AT + 200))
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    return replay, cluster


def test_a_node_whose_clock_ran_ahead_leaves_the_others_live_to_the_end(tmp_path: Path) -> None:
    # node02's clock ran 40 s ahead. Before, the replay filed its frames at their own times: the cursor
    # went on 40 s past the others' last frames, and node01 and node03 read stale at the end.
    replay, cluster = replay_of(tmp_path / "b.tar.gz", [
        part("node01", frames("node01", range(1, 91))),
        part("node02", frames("node02", range(1, 91), ahead_s=40.0), ahead_s=40.0),
        part("node03", frames("node03", range(1, 91)))])
    assert [c.offset_s for c in replay.clocks] == [0.0, 40.0, 0.0]
    assert (replay.start_at, replay.end_at) == (START_AT + 1, PULLED_AT)
    fired = play(replay, cluster)
    assert {cluster.nodes[k].name: s.state() for k, s in cluster.nodes.items()} == \
        {"node01": "live", "node02": "live", "node03": "live"}
    # Frames in step: node02's last one was filed when the others' were.
    assert [replay.frames_until(k, START_AT + 45)[-1].seq for k in replay.keys] == [45, 45, 45]
    # Its clock is now judged (as live, against its peers'), and nobody's staleness is made up.
    assert fired == {("node02", "clock_skew")}
    assert replay.notes == ()
    assert [a.message for a in cluster.rules.active() if a.rule == "clock_skew"] == \
        ["node node02 clock is +40.0 s off its peers"]
    assert board_view(cluster, replay.notes).notes == ()
    # The history screen asks for node02's own clock at the cursor (its frames' times).
    assert replay.node_time(replay.keys[1]) == PULLED_AT + 40.0


def test_a_node_that_stalled_long_before_its_pull_reads_stale(tmp_path: Path) -> None:
    # node02's sampler stalled after its 50th frame; its agent still answered the pull 40 s later.
    replay, cluster = replay_of(tmp_path / "b.tar.gz", [
        part("node01", frames("node01", range(1, 91))),
        part("node02", frames("node02", range(1, 51)))])
    fired = play(replay, cluster)
    stalled = cluster.nodes[replay.keys[1]]
    assert stalled.state() == "stale" and stalled.age_s() == PULLED_AT - (START_AT + 50)
    assert cluster.nodes[replay.keys[0]].state() == "live"
    # Its silence up to the pull is judged as live; before, not past its last frame.
    assert fired == {("node02", "node_stale")}


def test_a_bundle_of_one_stalled_node_plays_on_to_its_pull(tmp_path: Path) -> None:
    # Before, the replay ended at the node's last frame, where it still read live.
    replay, cluster = replay_of(tmp_path / "b.tar.gz", [part("node01", frames("node01", range(1, 51)))])
    replay.seek(cluster, replay.end_at)
    assert replay.end_at == PULLED_AT
    assert cluster.nodes[replay.keys[0]].state() == "stale"


def test_no_node_ages_past_its_pull(tmp_path: Path) -> None:
    # node02 was pulled a minute after node01 (it made the puller wait): node01's frames end where
    # its pull did, and the bundle knows nothing of it after; it does not read stale for that.
    late = part("node02", frames("node02", range(1, 151)))
    late.pulled_at = late.agent_now_at = PULLED_AT + 60
    replay, cluster = replay_of(tmp_path / "b.tar.gz", [part("node01", frames("node01", range(1, 91))), late])
    assert play(replay, cluster) == set()
    assert replay.end_at == PULLED_AT + 60
    assert [s.state() for s in cluster.nodes.values()] == ["live", "live"]


def test_a_bundle_that_does_not_date_its_pulls_replays_as_before(tmp_path: Path) -> None:
    replay, cluster = replay_of(tmp_path / "old.tar.gz", [
        part("node01", frames("node01", range(1, 91)), ahead_s=None),
        part("node02", frames("node02", range(1, 91), ahead_s=40.0), ahead_s=None)])
    assert [c.offset_s for c in replay.clocks] == [0.0, 0.0]
    assert replay.end_at == START_AT + 130 and replay.notes == NOT_JUDGED
    # One node it does not date among others it does: the alarms screen names it.
    replay, _ = replay_of(tmp_path / "mixed.tar.gz", [
        part("node01", frames("node01", range(1, 91))),
        part("node02", frames("node02", range(1, 91)), ahead_s=None)])
    assert replay.notes == (("clock skew and staleness after the last frame are not judged for node02 "
                             "(the bundle does not date their pull)"),)


def test_a_skew_within_the_pulls_precision_is_none(tmp_path: Path) -> None:
    # A pull dates a node's clock only to within the time its capture took to come in.
    replay, _ = replay_of(tmp_path / "b.tar.gz", [part("node01", frames("node01", range(1, 91))),
                                                  part("node02", frames("node02", range(1, 91)), ahead_s=0.4)])
    assert [c.offset_s for c in replay.clocks] == [0.0, 0.0]
    assert replay.end_at == PULLED_AT + 0.4


def test_an_export_of_the_replay_keeps_each_nodes_clock(tmp_path: Path) -> None:
    replay, cluster = replay_of(tmp_path / "b.tar.gz", [
        part("node01", frames("node01", range(1, 91))),
        part("node02", frames("node02", range(1, 91), ahead_s=40.0), ahead_s=40.0)])
    replay.seek(cluster, START_AT + 60)
    parts = replay_parts(replay)
    assert [(p.pulled_at, p.agent_now_at, p.frame_count) for p in parts] == \
        [(START_AT + 60, START_AT + 60, 60), (START_AT + 60, START_AT + 100, 60)]
    again, cluster = replay_of(tmp_path / "export.tar.gz", parts)
    assert [c.offset_s for c in again.clocks] == [0.0, 40.0] and again.end_at == START_AT + 60
    again.seek(cluster, again.end_at)
    assert [s.state() for s in cluster.nodes.values()] == ["live", "live"]
