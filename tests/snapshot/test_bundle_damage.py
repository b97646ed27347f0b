"""A bundle that is not what rigmon writes (damaged on the way, hand-edited, of a newer format) is refused
with a message that names the file of the bundle at fault, never a bare Python error; one whose bytes
fail their check is said to be damaged, not cut short."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from rigmon.cluster.replay import Replay
from rigmon.snapshot.bundle import BundleError, read_bundle
from tests.tui.snapshot_apps.fake_bundle import write_fake_bundle

Edit = Callable[[str, bytes], bytes]


def rewritten(tmp_path: Path, edit: Edit) -> Path:
    """The fake bundle with each member's content passed through ``edit`` (path below the top directory)."""
    source = write_fake_bundle(tmp_path / "good.tar.gz")
    out = io.BytesIO()
    with tarfile.open(source, "r:gz") as src, tarfile.open(fileobj=out, mode="w:gz") as dst:
        for member in src:
            fh = src.extractfile(member)
            assert fh is not None
            content = edit(member.name.split("/", 1)[1], fh.read())
            member.size = len(content)
            dst.addfile(member, io.BytesIO(content))
    path = tmp_path / "edited.tar.gz"
    path.write_bytes(out.getvalue())
    return path


def manifest_edit(change: Callable[[dict[str, object]], object]) -> Edit:
    return lambda name, content: (json.dumps(change(json.loads(content))).encode() if name == "manifest.json"
                                  else content)


@pytest.mark.parametrize(("edit", "message"), [
    (manifest_edit(lambda m: [m]), "a damaged bundle: manifest.json: not a JSON object"),
    (manifest_edit(lambda m: {**m, "nodes": {"node01": m["nodes"]}}),  # type: ignore[index]
     "a damaged bundle: manifest.json: nodes: expected a list of entries, each with a node and a dir"),
    (manifest_edit(lambda m: {**m, "nodes": [{"node": "node01"}]}),
     "a damaged bundle: manifest.json: nodes: expected a list of entries, each with a node and a dir"),
    (lambda name, content: b'{"schema": 1}' if name == "nodes/node02/info.json" else content,
     "a damaged bundle: nodes/node02/info.json: bad Info: node: required key is missing"),
    (lambda name, content: content + b'{"id": 3}\n' if name == "nodes/node01/events.jsonl" else content,
     "a damaged bundle: nodes/node01/events.jsonl: bad Event: id: expected a string, got 3"),
    # A damaged frames file loses that node's frames only: test_bundle_damaged_frames.py.
])
def test_a_damaged_file_of_the_bundle_is_named(tmp_path: Path, edit: Edit, message: str) -> None:
    path = rewritten(tmp_path, edit)
    # Before, read_bundle let a TypeError or AttributeError out (a manifest of another shape), and its
    # messages did not say which file was bad.
    with pytest.raises(BundleError) as caught:
        read_bundle(path)
    assert str(caught.value).startswith(f"{path}: {message}")
    with pytest.raises(BundleError) as caught:
        Replay.open(path)
    assert str(caught.value).startswith(f"{path}: {message}")


def test_a_bundle_of_a_newer_format_says_who_made_it(tmp_path: Path) -> None:
    path = rewritten(tmp_path, manifest_edit(lambda m: {**m, "format": 3, "created_by": "rigmon 9.0"}))
    with pytest.raises(BundleError, match=r"bundle format 3 \(made by rigmon 9\.0\); rigmon .* reads formats 1, 2: "
                                          "open it with a newer rigmon"):
        read_bundle(path)


def test_a_bundle_whose_bytes_fail_their_check_is_damaged_not_cut_short(tmp_path: Path) -> None:
    good = write_fake_bundle(tmp_path / "good.tar.gz")
    data = bytearray(good.read_bytes())
    # A bit flipped inside the last node's frames (stored, not deflated: the flip passes into the
    # content, and the gzip member's CRC catches it at its end).
    at = data.rindex(b"node03-run1") + 2
    data[at] ^= 0x01
    path = tmp_path / "flipped.tar.gz"
    path.write_bytes(bytes(data))
    bundle = read_bundle(path)
    assert bundle.cut_short is not None and bundle.cut_short.startswith(
        "the bundle is damaged after nodes/node03/events.jsonl (CRC check failed")
    assert [n.missing for n in bundle.nodes] == [None, None, "the bundle is damaged before its frames"]


def test_frames_that_unpack_past_any_bundle_rigmon_writes_are_refused(tmp_path: Path) -> None:
    import gzip

    bomb = gzip.compress(b"\0" * (200 * 1024 * 1024), 9)  # ~200 kB unpacking to 200 MB
    path = rewritten(tmp_path, lambda name, content: bomb if name == "nodes/node03/frames.jsonl.gz" else content)
    # Before, the frames were unpacked whole, whatever they grew to: a hostile bundle took the memory.
    with pytest.raises(BundleError, match=r": a damaged bundle: nodes/node03/frames\.jsonl\.gz: does not decompress: "
                                          r"unpacks to more than \d+ bytes \(200x its"):
        read_bundle(path)


def test_a_bundle_that_unpacks_past_any_rigmon_writes_is_refused_before_it_is_read(tmp_path: Path) -> None:
    huge = b"\0" * (150 * 1024 * 1024)
    path = rewritten(tmp_path, lambda name, content: huge if name == "REPORT.md" else content)
    assert path.stat().st_size < 1024 * 1024
    with pytest.raises(BundleError, match=r"REPORT\.md: the bundle unpacks to more than 200x its size"):
        read_bundle(path)


def test_a_directory_given_for_a_bundle_is_said_to_be_one(tmp_path: Path) -> None:
    # The bundle unpacked (to read REPORT.md), then its directory given to the replay.
    unpacked = tmp_path / "rigmon-snapshot-20261127-231111"
    unpacked.mkdir()
    with pytest.raises(BundleError) as caught:
        read_bundle(unpacked)
    message = str(caught.value)
    assert message.startswith(f"{unpacked}: a directory, not a bundle: give the .tar.gz file")
    assert "Errno" not in message


def test_a_bundle_cut_short_before_its_manifest_says_so(tmp_path: Path) -> None:
    good = write_fake_bundle(tmp_path / "good.tar.gz")
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(good.read_bytes()[:300])
    with pytest.raises(BundleError, match=r"not a readable bundle: it is cut short before its manifest\.json"):
        read_bundle(cut)
