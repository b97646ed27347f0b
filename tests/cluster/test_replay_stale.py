"""Staleness in a replay of a bundle that does not date its pulls is judged by each node's own frame
times: a gap between two of a node's frames is its sampler stalling, but the cursor passing a node's
last frame is not (a node whose clock ran ahead carries the cursor past the others' last frames; the
bundle cannot tell that from a stalled node), and no node ages past its last frame."""

from __future__ import annotations

import random
from pathlib import Path

from rigmon.cluster.alarm_board import board_view
from rigmon.cluster.replay import Replay
from rigmon.cluster.store import ClusterStore
from rigmon.schema import Frame
from rigmon.snapshot.bundle import NodePart, frames_gzip, write_bundle
from tests.tui.snapshot_apps.fake_agent import START_AT, make_frame


def replay_of(tmp_path: Path, nodes: dict[str, list[Frame]]) -> tuple[Replay, ClusterStore]:
    parts = [NodePart(node=node, source=f"http://{node}:9871", from_at=frames[0].taken_at,
                      to_at=frames[-1].taken_at, latest=frames[-1], frames_gz=frames_gzip(frames),
                      frame_count=len(frames)) for node, frames in nodes.items()]
    replay = Replay.open(write_bundle(tmp_path / "b.tar.gz", parts, 600.0, "", created_at=START_AT + 200))
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    return replay, cluster


def frames(node: str, seqs: range, ahead_s: float = 0.0) -> list[Frame]:
    rng = random.Random(node)
    return [make_frame(node, f"{node}-run", seq, rng, start_at=START_AT + ahead_s) for seq in seqs]


def play(replay: Replay, cluster: ClusterStore, step_s: int = 5) -> set[tuple[str, str]]:
    """Play the whole recording, evaluating the cluster rules every ``step_s``; every (node, rule) that fired."""
    fired: set[tuple[str, str]] = set()
    for at in range(int(replay.start_at), int(replay.end_at) + step_s, step_s):
        replay.seek(cluster, at)
        fired |= {(t.alarm.node, t.alarm.rule) for t in cluster.evaluate_alarms() if t.change == "firing"}
    return fired


def test_a_node_whose_clock_ran_ahead_does_not_make_the_others_stale(tmp_path: Path) -> None:
    # node02's clock runs 40 s ahead: its last frame is 40 s after node01's, and the cursor goes on
    # to it. Before, node01 then read stale and node_stale fired, which live it never did.
    replay, cluster = replay_of(tmp_path, {"node01": frames("node01", range(1, 91)),
                                           "node02": frames("node02", range(1, 91), ahead_s=40.0)})
    assert play(replay, cluster) == set()
    assert replay.at == replay.end_at and cluster.rules.active() == () and cluster.rules.recent() == ()
    # Nor does node01's row read stale (before, it did for the last 40 s).
    assert [s.state() for s in cluster.nodes.values()] == ["live", "live"]
    # ... and the alarms screen says what a replay does not judge.
    assert "nor staleness after a node's last frame" in board_view(cluster, replay.notes).notes


def test_a_gap_in_a_nodes_own_frames_is_stale(tmp_path: Path) -> None:
    # node02's sampler stalled for 30 s mid-recording: that is in its own frames, and fires as live.
    replay, cluster = replay_of(tmp_path, {"node01": frames("node01", range(1, 91)),
                                           "node02": [f for f in frames("node02", range(1, 91))
                                                      if not 40 < f.seq < 70]})
    replay.seek(cluster, START_AT + 60)
    cluster.evaluate_alarms()
    (alarm,) = cluster.rules.active()
    assert (alarm.node, alarm.rule, alarm.state) == ("node02", "node_stale", "firing")
    replay.seek(cluster, START_AT + 75)
    cluster.evaluate_alarms()
    assert cluster.rules.active() == ()
    assert [(a.node, a.rule) for a in cluster.rules.recent()] == [("node02", "node_stale")]
    # A seek back over the gap starts the rules over, still judging by the nodes' own frames.
    replay.seek(cluster, START_AT + 10)
    assert play(replay, cluster) == {("node02", "node_stale")}
