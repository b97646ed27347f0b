"""Replay of a bundle into the node stores: seek forward and back, recorded states, alarms from events, play."""

from __future__ import annotations

import io
import random
import tarfile
from pathlib import Path

import msgspec
import pytest

from rigmon.cluster.export import replay_parts
from rigmon.cluster.replay import Replay
from rigmon.cluster.store import ClusterStore
from rigmon.schema import Event
from rigmon.snapshot.bundle import BundleError, NodePart, frames_gzip, write_bundle
from tests.tui.snapshot_apps.fake_agent import START_AT, make_frame
from tests.tui.snapshot_apps.fake_bundle import (
    ALARM_FIRES,
    ALARM_RESOLVES,
    FRAMES,
    GPU_LOST_AT,
    SILENT_AFTER,
    node_frames,
    write_fake_bundle,
)


def replayed(tmp_path: Path) -> tuple[Replay, ClusterStore]:
    replay = Replay.open(write_fake_bundle(tmp_path / "b.tar.gz"))
    # The stores take the replay's clock; the one given here is never read.
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    return replay, cluster


def test_frames_reach_the_stores_up_to_the_cursor(tmp_path: Path) -> None:
    replay, cluster = replayed(tmp_path)
    assert (replay.start_at, replay.end_at) == (START_AT + 1, START_AT + FRAMES)
    assert replay.frame_count == 2 * FRAMES + SILENT_AFTER
    replay.seek(cluster, START_AT + 50.5)
    store = cluster.nodes["replay:node02"]
    assert store.history.seqs() == list(range(1, 51))
    assert store.latest == node_frames("node02")[49]
    assert store.info is not None and store.url == "http://node02.test:9871"
    assert [e.kind for e in store.events] == ["agent_started", "alarm_firing"]


def test_seeking_back_starts_over_without_duplicates(tmp_path: Path) -> None:
    replay, cluster = replayed(tmp_path)
    replay.seek(cluster, START_AT + 110)
    replay.seek(cluster, START_AT + 20)
    store = cluster.nodes["replay:node01"]
    assert store.history.seqs() == list(range(1, 21)) and store.restarts == 0
    replay.seek(cluster, START_AT + 10_000)  # clamped to the end; forward: the same stores go on
    assert replay.at == replay.end_at and store is cluster.nodes["replay:node01"]
    assert store.history.seqs() == list(range(1, FRAMES + 1))


def test_states_are_those_of_the_recording(tmp_path: Path) -> None:
    replay, cluster = replayed(tmp_path)
    replay.seek(cluster, START_AT + SILENT_AFTER + 1)
    assert cluster.nodes["replay:node03"].state() == "live"
    replay.seek(cluster, START_AT + SILENT_AFTER + 20)
    assert cluster.nodes["replay:node01"].state() == "live"
    # The bundle does not date its pulls, so it cannot tell a node that stalled from one whose clock
    # runs behind the others' (tests/cluster/test_replay_stale.py): node03 does not age past its last
    # frame (before, its row read stale here), and node_stale is not judged.
    node03 = cluster.nodes["replay:node03"]
    assert node03.age_s() == 0.0 and node03.state() == "live"
    cluster.evaluate_alarms()
    assert cluster.rules.active() == ()


def test_alarms_come_back_from_the_events(tmp_path: Path) -> None:
    replay, cluster = replayed(tmp_path)
    store = cluster.nodes["replay:node02"]
    replay.seek(cluster, START_AT + ALARM_FIRES)
    assert [(a.rule, a.state) for a in store.alarm_list.active] == [("psu_rail_low_critical", "firing")]  # type: ignore[union-attr]
    replay.seek(cluster, START_AT + ALARM_RESOLVES)
    assert store.alarm_list.active == ()  # type: ignore[union-attr]
    assert [a.rule for a in store.alarm_list.recent] == ["psu_rail_low_critical"]  # type: ignore[union-attr]
    replay.seek(cluster, START_AT + GPU_LOST_AT - 1)
    store = cluster.nodes["replay:node02"]
    assert store.alarm_list.active == ()  # type: ignore[union-attr]
    replay.seek(cluster, START_AT + FRAMES)
    assert [a.rule for a in store.alarm_list.active] == ["gpu_lost"]  # type: ignore[union-attr]
    view = next(v for v in cluster.views() if v.key == "replay:node02")
    assert view.summary is not None and view.summary.alarms == 1


def test_play_pause_speed_and_the_end(tmp_path: Path) -> None:
    replay, cluster = replayed(tmp_path)
    assert replay.playing
    replay.tick(cluster, 2.0)
    assert replay.at == START_AT + 3
    replay.change_speed(1)
    replay.change_speed(1)
    assert replay.speed == 5.0
    replay.tick(cluster, 2.0)
    assert replay.at == START_AT + 13
    replay.toggle(cluster)
    replay.tick(cluster, 100.0)
    assert replay.at == START_AT + 13 and not replay.playing
    replay.toggle(cluster)
    replay.tick(cluster, 1000.0)
    assert replay.at == replay.end_at and not replay.playing
    position = replay.position()
    assert position.fraction == 1.0 and position.source == "b.tar.gz"
    replay.toggle(cluster)  # play at the end: from the start again
    assert replay.playing and replay.at == replay.start_at



def test_two_nodes_of_one_name_stay_two_nodes(tmp_path: Path) -> None:
    # Two rigs whose hosts are both called "ubuntu": the live dashboard follows them by URL as two
    # rows, the bundle keeps them in nodes/ubuntu and nodes/ubuntu-2. Before, the replay filed both
    # into one store: one row whose frames alternated between the two machines.
    parts = []
    for n, (url, run) in enumerate((("http://10.0.0.1:9871", "a"), ("http://10.0.0.2:9871", "b"))):
        rng = random.Random(n)
        frames = [make_frame("ubuntu", run, seq, rng) for seq in range(1, 31)]
        parts.append(NodePart(node="ubuntu", source=url, from_at=frames[0].taken_at, to_at=frames[-1].taken_at,
                              latest=frames[-1], frames_gz=frames_gzip(frames), frame_count=len(frames)))
    replay = Replay.open(write_bundle(tmp_path / "b.tar.gz", parts, 600.0, "", created_at=START_AT + 40))
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    replay.seek(cluster, replay.end_at)
    assert len(cluster.nodes) == 2 and replay.keys == ["replay:ubuntu", "replay:ubuntu-2"]
    for key, url, run in zip(replay.keys, ("http://10.0.0.1:9871", "http://10.0.0.2:9871"), "ab"):
        store = cluster.nodes[key]
        assert store.url == url and store.restarts == 0
        assert store.history.seqs() == list(range(1, 31))
        assert {f.run_id for f in replay.frames_until(key)} == {run}
    # The export of this replay keeps them apart as well.
    assert [p.frame_count for p in replay_parts(replay)] == [30, 30]


def test_a_pending_alarm_ends_when_its_agent_restarts(tmp_path: Path) -> None:
    # An agent does not carry a pending alarm over a restart (its hold starts again under a
    # new id) and no event ends it: the replay kept it pending to the end of the recording.
    rng = random.Random(3)
    pending = Event(id="a-9", at=START_AT + 5, kind="alarm_pending", severity="info", subject="psu",
                    message="rail pending: rail 11.6 V",
                    data={"alarm_id": "a-a1", "rule": "rail", "severity": "warning", "state": "pending"})
    first = [make_frame("node01", "a", seq, rng) for seq in range(1, 11)]
    first[4] = msgspec.structs.replace(first[4], events=(pending,))
    second = [make_frame("node01", "b", seq, rng, start_at=START_AT + 20) for seq in range(1, 11)]
    frames = first + second
    parts = [NodePart(node="node01", source="http://10.0.0.1:9871", from_at=frames[0].taken_at,
                      to_at=frames[-1].taken_at, latest=frames[-1], frames_gz=frames_gzip(frames),
                      frame_count=len(frames))]
    replay = Replay.open(write_bundle(tmp_path / "b.tar.gz", parts, 600.0, "", created_at=START_AT + 40))
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    store = cluster.nodes[replay.keys[0]]
    replay.seek(cluster, first[-1].taken_at)
    assert [(a.id, a.state) for a in store.alarm_list.active] == [("a-a1", "pending")]  # type: ignore[union-attr]
    replay.seek(cluster, replay.end_at)
    assert store.restarts == 1 and store.alarm_list.active == ()  # type: ignore[union-attr]


def test_a_node_the_export_could_not_pull_is_unreachable_not_connecting(tmp_path: Path) -> None:
    # Before: a dead node's part (no frames, the pull's error in the manifest) showed "connecting"
    # for the whole replay, with nothing saying why its row stayed empty.
    rng = random.Random(1)
    frames = [make_frame("node01", "a", seq, rng) for seq in range(1, 11)]
    parts = [NodePart(node="node01", source="http://10.0.0.1:9871", from_at=frames[0].taken_at,
                      to_at=frames[-1].taken_at, latest=frames[-1], frames_gz=frames_gzip(frames), frame_count=10),
             NodePart(node="http://10.0.0.2:9871", source="http://10.0.0.2:9871",
                      error="connection refused: no agent is listening at http://10.0.0.2:9871")]
    replay = Replay.open(write_bundle(tmp_path / "b.tar.gz", parts, 600.0, "", created_at=START_AT + 20))
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    for at in (replay.start_at, replay.end_at, replay.start_at):  # after a seek back too
        replay.seek(cluster, at)
        dead = cluster.nodes[replay.keys[1]]
        assert dead.state() == "unreachable"
        assert dead.error == "not in this recording: connection refused: no agent is listening at http://10.0.0.2:9871"
        assert cluster.nodes[replay.keys[0]].state() == "live"
    # Exported again from the replay, it is still the node that could not be pulled.
    assert [p.error for p in replay_parts(replay)] == [None, parts[1].error]


def _retar(src: Path, dst: Path, change: dict[str, bytes]) -> Path:
    """``src`` with the members named in ``change`` (path below the top directory) replaced."""
    with tarfile.open(src, "r:gz") as tar_in, tarfile.open(dst, "w:gz") as tar_out:
        for member in tar_in.getmembers():
            data = tar_in.extractfile(member).read()  # type: ignore[union-attr]
            data = change.get(member.name.split("/", 1)[1], data)
            member.size = len(data)
            tar_out.addfile(member, io.BytesIO(data))
    return dst


@pytest.mark.parametrize("change", [
    {"manifest.json": b"{not json"},
    {"manifest.json": b'{"format": 2}'},
    {"manifest.json": b"[1, 2]"},
    {"nodes/node02/info.json": b'{"x":'},
], ids=["manifest-not-json", "manifest-without-nodes", "manifest-a-list", "info-cut"])
def test_a_damaged_bundle_is_refused_naming_the_file(tmp_path: Path, change: dict[str, bytes]) -> None:
    # Before: a traceback (JSONDecodeError, KeyError, SchemaError, zlib.error) and exit code 1.
    # (A damaged frames file loses that node's frames only: tests/snapshot/test_bundle_damaged_frames.py.)
    good = write_fake_bundle(tmp_path / "good.tar.gz")
    bad = _retar(good, tmp_path / "bad.tar.gz", change)
    with pytest.raises(BundleError) as caught:
        Replay.open(bad)
    assert str(caught.value).startswith(f"{bad}: ")


def test_a_bundle_cut_short_replays_what_it_holds_and_says_where_it_stops(tmp_path: Path) -> None:
    """An interrupted download: it was refused whole, although the manifest and the first nodes
    (written first) were all there."""
    good = write_fake_bundle(tmp_path / "good.tar.gz")
    with tarfile.open(good) as tar:
        names = [m.name for m in tar.getmembers()]
    raw = good.read_bytes()
    cut = tmp_path / "cut.tar.gz"
    for keep in range(len(raw) - 1, 0, -max(1, len(raw) // 200)):
        cut.write_bytes(raw[:keep])
        replay = Replay.open(cut)
        if not replay.bundle.nodes[-1].frames:
            break
    assert replay.bundle.cut_short is not None and replay.bundle.cut_short.startswith("the bundle is cut short after ")
    first, last = replay.bundle.nodes[0], replay.bundle.nodes[-1]
    assert first.frames and last.missing == "the bundle is cut short before its frames"
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    missing = cluster.nodes[replay.keys[-1]]
    assert missing.state() == "unreachable"
    assert missing.error == "not in this recording: the bundle is cut short before its frames"
    assert any(name.endswith("node03/frames.jsonl.gz") for name in names)
    cut.write_bytes(raw[:20])  # not even the manifest: refused, naming the file
    with pytest.raises(BundleError) as caught:
        Replay.open(cut)
    assert str(caught.value).startswith(f"{cut}: ")
