"""A bundle whose one node's frames file is damaged is read: that node's frames are said to be damaged (one
line naming the file and the node), and the rest (the report, its events, the other nodes' frames) plays;
frames that unpack past any bundle or of a newer schema still refuse it."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest

from rigmon.cluster.replay import Replay
from rigmon.cluster.store import ClusterStore
from rigmon.schema import SCHEMA_VERSION, Event, History
from rigmon.snapshot.bundle import BundleError, NodePart, frames_gzip, read_bundle, write_bundle
from tests.tui.snapshot_apps.fake_agent import START_AT, FakeAgent
from tests.tui.snapshot_apps.fake_bundle import FRAMES, SILENT_AFTER, node_frames

FRAMES_FILE = "nodes/node02/frames.jsonl.gz"
XID = Event(id="node02-run1-x1", at=START_AT + 30, kind="xid", severity="critical", subject="gpu:3",
            message="Xid 79: GPU has fallen off the bus")


def bundle_with(tmp_path: Path, frames_file: bytes | None = None) -> Path:
    """Three nodes; node02 has an event of its own (events.jsonl) and, if given, this frames file."""
    parts = []
    for node in ("node01", "node02", "node03"):
        frames = node_frames(node)
        history = History(schema=SCHEMA_VERSION, node=node, from_at=frames[0].taken_at, to_at=frames[-1].taken_at,
                          tier="frames", step_s=1.0, series={}, events=(XID,) if node == "node02" else ())
        parts.append(NodePart(node=node, source=FakeAgent(node).url, from_at=frames[0].taken_at,
                              to_at=frames[-1].taken_at, info=FakeAgent(node).info(), latest=frames[-1],
                              history=history, frames_gz=frames_gzip(frames), frame_count=len(frames)))
    if frames_file is not None:
        parts[1].frames_gz = frames_file
    return write_bundle(tmp_path / "b.tar.gz", parts, 600.0, "# rigmon snapshot\nnode02 lost GPU 3\n",
                        created_at=START_AT + FRAMES + 5)


def corrupt_deflate(packed: bytes) -> bytes:
    body = bytearray(packed)
    for i in range(40, 120):
        body[i] ^= 0xFF
    return bytes(body)


GOOD = frames_gzip(node_frames("node02"))
DAMAGE = {
    "cut-in-half": (GOOD[:len(GOOD) // 2], "does not decompress: "),
    "not-gzip": (b"not gzip", "does not decompress: "),
    "corrupt-deflate": (corrupt_deflate(GOOD), "does not decompress: "),
    "foreign-line": (gzip.compress(b'{"garbage": true}\n'), "line 1: bad Frame: "),
    "cut-line": (gzip.compress(gzip.decompress(GOOD)[:5000]), "line "),
}


@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_a_damaged_frames_file_loses_that_nodes_frames_only(tmp_path: Path, damage: str) -> None:
    """Before: BundleError "a damaged bundle: nodes/node02/frames.jsonl.gz: ...": the report, the events and
    the other nodes' frames were lost to the reader."""
    content, why = DAMAGE[damage]
    path = bundle_with(tmp_path, content)
    bundle = read_bundle(path)
    assert bundle.report == "# rigmon snapshot\nnode02 lost GPU 3\n" and bundle.cut_short is None
    node01, node02, node03 = bundle.nodes
    assert (len(node01.frames), len(node03.frames)) == (FRAMES, SILENT_AFTER)
    assert node01.missing is None and node03.missing is None
    assert node02.frames == [] and node02.events == [XID] and node02.info is not None
    assert node02.missing is not None
    assert node02.missing.startswith(f"the frames of node node02 are damaged ({FRAMES_FILE}: {why}")
    assert node02.missing.endswith("): none of them is read") and "\n" not in node02.missing

    replay = Replay.open(path)
    cluster = ClusterStore(replay.clock)
    replay.attach(cluster)
    replay.seek(cluster, replay.end_at)
    assert replay.frame_count == FRAMES + SILENT_AFTER
    damaged = cluster.nodes["replay:node02"]
    assert damaged.state() == "unreachable" and damaged.error == f"not in this recording: {node02.missing}"
    assert cluster.nodes["replay:node01"].state() == "live"
    assert cluster.nodes["replay:node01"].latest == node_frames("node01")[-1]


def test_the_damage_line_carries_no_terminal_control_from_the_file(tmp_path: Path) -> None:
    part = NodePart(node="evil\x1b[2J", source="http://evil:9871", frames_gz=b"not gzip", frame_count=3)
    (node,) = read_bundle(write_bundle(tmp_path / "b.tar.gz", [part], 60.0, "")).nodes
    assert node.missing is not None and node.missing.startswith("the frames of node evil")
    assert "\x1b" not in node.missing


def _swap(path: Path, name: str, content: bytes) -> Path:
    out = io.BytesIO()
    with tarfile.open(path, "r:gz") as src, tarfile.open(fileobj=out, mode="w:gz") as dst:
        for member in src:
            fh = src.extractfile(member)
            assert fh is not None
            data = content if member.name.split("/", 1)[1] == name else fh.read()
            member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    edited = path.with_name("edited.tar.gz")
    edited.write_bytes(out.getvalue())
    return edited


def test_frames_of_a_newer_schema_still_refuse_the_bundle(tmp_path: Path) -> None:
    newer = gzip.compress(b'{"schema": %d, "node": "node02"}\n' % (SCHEMA_VERSION + 1))
    path = _swap(bundle_with(tmp_path), FRAMES_FILE, newer)
    with pytest.raises(BundleError, match=rf"a damaged bundle: {FRAMES_FILE}: schema version {SCHEMA_VERSION + 1}"):
        read_bundle(path)
