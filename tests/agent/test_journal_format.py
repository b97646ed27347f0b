"""Journal formats: a journal of format 2 (written by the code of that format, a fixture) still reads,
exports and snapshots as it is, and a writer of format 3 takes it over without losing a frame."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from rigmon.agent.frame_json import frame_json
from rigmon.agent.journal import JournalReader, JournalStore
from rigmon.agent.journal.layout import FORMAT_VERSION
from rigmon.snapshot.bundle import read_bundle
from tests.agent.journal_frames import T0, FakeClock, frame
from tests.snapshot.test_bundle import ENV, REPO

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "journal" / "format-2" / "journal.sqlite3"

#: What tests/fixtures/journal/make_format2.py wrote: run "old" (200 frames), run "dead" (120 frames).
OLD = [frame(i + 1, T0 + i, float(i % 37), run_id="old") for i in range(200)]
DEAD = [frame(i + 1, T0 + 300 + i, float((200 + i) % 37), run_id="dead") for i in range(120)]


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir()
    shutil.copy(FIXTURE, state / "journal.sqlite3")
    return state


def expected_json() -> list[bytes]:
    # The dead run's second frame carried an event; frames compare by their wire JSON without it.
    return [frame_json(f) for f in OLD + DEAD]


def strip_events(raw: bytes) -> bytes:
    data = json.loads(raw)
    data["events"] = []
    return json.dumps(data, separators=(",", ":")).encode()


def test_the_fixture_is_format_2_with_frames_in_both_kinds_of_storage(journal: Path) -> None:
    # A copy: SQLite creates the WAL's index beside a journal it reads, and the fixture stays as committed.
    conn = sqlite3.connect(f"file:{journal / 'journal.sqlite3'}?mode=ro", uri=True)
    try:
        assert conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == ("2",)
        assert "stream" not in {row[1] for row in conn.execute("PRAGMA table_info(frames)")}
        assert conn.execute("SELECT SUM(frames) FROM blocks").fetchone()[0] == 250
        assert conn.execute("SELECT COUNT(*) FROM frames WHERE dict_id IS NOT NULL").fetchone()[0] == 70
    finally:
        conn.close()
    assert FORMAT_VERSION == 3


def test_a_format_2_journal_reads_as_it_is(journal: Path) -> None:
    with JournalReader(journal) as reader:
        got = reader.frames_json(T0, T0 + 1000)
        assert [strip_events(r) for r in got] == [strip_events(r) for r in expected_json()]
        assert reader.time_range() == (T0, T0 + 419)
        assert [e.id for e in reader.events(T0, T0 + 1000)] == ["dead-1"]
        assert [(r.run_id, r.clean) for r in reader.runs()] == [("old", True), ("dead", None)]
        # Export: blocks as stored plus the rows of format 2 as a new member; every frame once.
        exported = gzip.decompress(reader.frames_gzip(T0, T0 + 1000).body).splitlines()
        assert [strip_events(r) for r in exported] == [strip_events(r) for r in expected_json()]
        history = reader.history("n1", T0 + 250, T0 + 419, 1.0, names={"host.cpu_pct"})
        assert history.series["host.cpu_pct"].min == tuple(float((200 + i) % 37) for i in range(120))
    # Read-only: the file is still format 2.
    assert sqlite3.connect(journal / "journal.sqlite3").execute(
        "SELECT value FROM meta WHERE key = 'format'").fetchone() == ("2",)


def test_a_snapshot_of_a_format_2_journal(journal: Path, tmp_path: Path) -> None:
    out = tmp_path / "crash.tar.gz"
    proc = subprocess.run([sys.executable, "-m", "rigmon", "snapshot", "--journal", str(journal), "--since", "1h",
                           "-o", str(out)], capture_output=True, text=True, env=ENV, cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    (node,) = read_bundle(out).nodes
    assert node.node == "n1"
    assert [(f.run_id, f.seq) for f in node.frames] == [(f.run_id, f.seq) for f in OLD + DEAD]
    assert [e.id for e in node.events] == ["dead-1"]


def test_a_writer_of_format_3_takes_a_format_2_journal_over(journal: Path) -> None:
    clock = FakeClock(T0 + 500)
    store = JournalStore(journal, clock, block_frames=50)
    try:
        assert store.conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == ("3",)
        (unclean,) = store.begin_run("new", "n1", T0 + 500)
        assert unclean.run_id == "dead" and unclean.last_frame_at == T0 + 419
        new = [frame(i + 1, T0 + 500 + i, float(i % 37), run_id="new") for i in range(130)]
        store.write(new)
        before = store.frames_json(T0, T0 + 1000)
        assert [strip_events(r) for r in before] == [strip_events(r) for r in expected_json() + [
            frame_json(f) for f in new]]
        clock.t = T0 + 2000
        store.maintain()
        # Every frame in blocks now, the old rows recompressed as format 2 did, the new streams as
        # written; only the stream the writer still has open (30 frames) waits for its block.
        assert store.conn.execute("SELECT run_id, COUNT(*), MIN(seq) FROM frames GROUP BY run_id").fetchall() == [
            ("new", 30, 101)]
        assert store.conn.execute("SELECT run_id, frames FROM blocks WHERE min_at > ?", (T0 + 200,)).fetchall() == [
            ("dead", 50), ("dead", 50), ("dead", 20), ("new", 50), ("new", 50)]
        assert store.conn.execute("SELECT COUNT(*) FROM dicts").fetchone()[0] == 0
        assert store.frames_json(T0, T0 + 1000) == before
        assert store.buckets(0, T0 + 600, T0 + 630)[0][1]["host.cpu_pct"][3] == 30
    finally:
        store.close()
    with JournalReader(journal) as reader:
        assert reader.frames_json(T0, T0 + 1000) == before
