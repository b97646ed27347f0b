"""Block recompression: frames move from the per-frame table into gzip blocks without being lost,
duplicated or changed; readers see both kinds of storage as one; exports send blocks as stored;
retention and size caps work on blocks; a kill -9 in the middle of it leaves a whole journal."""

from __future__ import annotations

import gzip
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from rigmon.agent.journal import upkeep
from rigmon.agent.journal import (
    BLOCK_AFTER_S,
    BLOCK_FLUSH_S,
    BLOCK_FRAMES,
    JournalReader,
    JournalStore,
    Retention,
    encode_history,
)
from rigmon.schema import History, encode
from tests.agent.journal_frames import T0, FakeClock, frame

REPO = Path(__file__).resolve().parents[2]


def filled(tmp_path: Path, n: int, clock: FakeClock | None = None, **kwargs: object) -> JournalStore:
    """A journal of ``n`` frames at 1 Hz from T0, the clock just after the last one."""
    clock = clock or FakeClock()
    store = JournalStore(tmp_path, clock, **kwargs)  # type: ignore[arg-type]
    store.write([frame(i + 1, T0 + i, float(i % 37)) for i in range(n)])
    clock.t = T0 + n
    return store


def table_counts(store: JournalStore) -> tuple[int, int]:
    """(frames in blocks, frames in the per-frame table)."""
    in_blocks = store.conn.execute("SELECT COALESCE(SUM(frames), 0) FROM blocks").fetchone()[0]
    recent = store.conn.execute("SELECT COUNT(*) FROM frames").fetchone()[0]
    return int(in_blocks), int(recent)


def test_compaction_round_trips_every_frame_byte_for_byte(tmp_path: Path) -> None:
    store = filled(tmp_path, 1000)
    before = store.frames_json(T0, T0 + 999)
    written = store.compact()
    # Frames older than BLOCK_AFTER_S in whole blocks; the rest wait in the per-frame table.
    old_enough = 1000 - int(BLOCK_AFTER_S)
    assert written == old_enough // BLOCK_FRAMES
    assert table_counts(store) == (written * BLOCK_FRAMES, 1000 - written * BLOCK_FRAMES)
    assert store.frames_json(T0, T0 + 999) == before
    assert [f.seq for f in store.frames(T0, T0 + 999)] == list(range(1, 1001))
    # A block is one gzip member of JSON lines with its frames' times alongside.
    body, first_seq, last_seq, count = store.conn.execute(
        "SELECT body, first_seq, last_seq, frames FROM blocks ORDER BY id LIMIT 1").fetchone()
    assert gzip.decompress(body).splitlines() == before[:BLOCK_FRAMES]
    assert (first_seq, last_seq, count) == (1, BLOCK_FRAMES, BLOCK_FRAMES)
    store.close()


def test_readers_see_blocks_and_recent_frames_as_one(tmp_path: Path) -> None:
    store = filled(tmp_path, 1000)
    store.compact()
    boundary = T0 + store.conn.execute("SELECT MIN(seq) FROM frames").fetchone()[0] - 1
    with JournalReader(tmp_path) as reader:
        assert reader.time_range() == (T0, T0 + 999)
        across = reader.frames(boundary - 5, boundary + 5)
        assert [f.taken_at for f in across] == [boundary + k for k in range(-5, 6)]
        assert reader.count_frames(T0, T0 + 999) == 1000
        assert reader.count_frames(boundary - 5, boundary + 5) == 11
        assert reader.frames_json(T0, T0 + 999, limit=7) == store.frames_json(T0, T0 + 6)
        short = reader.history("n1", boundary - 50, boundary + 50, 1.0, {"host.cpu_pct"})
        assert short.tier == "frames" and short.series["host.cpu_pct"].at == tuple(boundary + k for k in range(-50, 51))
    store.close()


def test_tiers_are_computed_from_blocks_too(tmp_path: Path) -> None:
    store = filled(tmp_path, 1800)
    expected = store.compute_buckets(0, T0, T0 + 1800)
    store.compact()
    assert store.compute_buckets(0, T0, T0 + 1800) == expected
    store.downsample()
    # Stored buckets keep min, max and count exactly (the mean to 7 digits).
    assert [(at, {n: (st[0], st[2], st[3]) for n, st in b.items()}) for at, b in store.buckets(0, T0, T0 + 1800)] == \
        [(at, {n: (st[0], st[2], st[3]) for n, st in b.items()}) for at, b in expected]
    store.close()


def test_a_crashed_runs_final_readings_come_from_its_blocks(tmp_path: Path) -> None:
    clock = FakeClock()
    store = JournalStore(tmp_path, clock)
    store.begin_run("run1", "n1", T0)
    store.write([frame(i + 1, T0 + i, 40.0 if i != 598 else 3.0) for i in range(600)])
    clock.t = T0 + 3600
    assert store.compact() == 2 and table_counts(store) == (600, 0)
    (unclean,) = store.begin_run("run2", "n1", clock.t)
    assert unclean.last_frame_at == T0 + 599
    assert unclean.final["host.cpu_pct"] == (3.0, 40.0)
    store.close()


def test_blocks_hold_one_run_and_short_blocks_are_flushed(tmp_path: Path) -> None:
    clock = FakeClock()
    store = JournalStore(tmp_path, clock)
    store.write([frame(i + 1, T0 + i, 1.0, run_id="a") for i in range(10)])
    store.write([frame(i + 1, T0 + 10 + i, 1.0, run_id="b") for i in range(10)])
    clock.t = T0 + 20 + BLOCK_AFTER_S
    # Run a ended (b began): its 10 frames make a block; b's may still grow.
    assert store.compact() == 1
    assert store.conn.execute("SELECT run_id, frames FROM blocks").fetchall() == [("a", 10)]
    clock.t = T0 + 11 + BLOCK_AFTER_S + BLOCK_FLUSH_S
    assert store.compact() == 1
    assert store.conn.execute("SELECT run_id, frames FROM blocks ORDER BY id").fetchall() == [("a", 10), ("b", 10)]
    assert [f.run_id for f in store.frames(T0, T0 + 19)] == ["a"] * 10 + ["b"] * 10
    store.close()


def test_export_sends_whole_blocks_as_stored(tmp_path: Path) -> None:
    store = filled(tmp_path, 1000)
    store.compact()
    stored = [body for (body,) in store.conn.execute("SELECT body FROM blocks ORDER BY id")]
    every = store.frames_json(T0, T0 + 999)
    whole = store.frames_gzip(T0, T0 + 999)
    assert (whole.count, whole.last_at, whole.more) == (1000, T0 + 999, False)
    assert whole.body.startswith(b"".join(stored))
    assert gzip.decompress(whole.body).splitlines() == every
    # A window cutting blocks: the edges are recompressed, the middle block passes as is.
    cut = store.frames_gzip(T0 + 250, T0 + 700)
    assert stored[1] in cut.body and stored[0] not in cut.body
    assert gzip.decompress(cut.body).splitlines() == every[250:701]
    # A limit: where to go on from.
    part = store.frames_gzip(T0, T0 + 999, limit=450)
    assert (part.count, part.last_at, part.more) == (450, T0 + 449, True)
    assert gzip.decompress(part.body).splitlines() == every[:450]
    exact = store.frames_gzip(T0, T0 + 299, limit=300)
    assert (exact.count, exact.more) == (300, False)
    empty = store.frames_gzip(T0 - 100, T0 - 1)
    assert (empty.body, empty.count, empty.last_at) == (b"", 0, None)
    store.close()


def test_retention_hides_expired_frames_at_once_and_drops_whole_blocks(tmp_path: Path) -> None:
    clock = FakeClock()
    store = filled(tmp_path, 1500, clock, retention=Retention(frames_keep_s=1000))
    store.compact()
    blocks_before = store.conn.execute("SELECT COUNT(*) FROM blocks").fetchone()[0]
    store.retain()  # now T0 + 1500: frames before T0 + 500 expire
    with JournalReader(tmp_path) as reader:
        assert reader.time_range() == (T0 + 500, T0 + 1499)
        assert reader.frames(T0, T0 + 510)[0].taken_at == T0 + 500
        assert reader.count_frames(T0, T0 + 1499) == 1000
        assert gzip.decompress(reader.frames_gzip(T0, T0 + 1499).body).count(b"\n") == 1000
    # The block of frames 0-299 went; the one holding 300-599 stays until its last frame expires.
    assert store.conn.execute("SELECT COUNT(*) FROM blocks").fetchone()[0] == blocks_before - 1
    assert store.conn.execute("SELECT MIN(min_at) FROM blocks").fetchone()[0] == T0 + 300
    store.close()


def commits_seen(reader: sqlite3.Connection) -> int:
    """Changes to ``PRAGMA data_version`` as another connection sees it: one per commit that wrote pages."""
    return int(reader.execute("PRAGMA data_version").fetchone()[0])


def test_retention_commits_only_when_something_expired(tmp_path: Path) -> None:
    clock = FakeClock()
    store = filled(tmp_path, 1500, clock, retention=Retention(frames_keep_s=2000))
    store.compact()
    watcher = sqlite3.connect(tmp_path / "journal.sqlite3", isolation_level=None)
    # Nothing is older than its retention: a pass writes nothing (no WAL frames, no fsync).
    version = commits_seen(watcher)
    for _ in range(3):
        store.retain()
        clock.t += 15
    assert commits_seen(watcher) == version
    assert store.expired_before() is None
    # Frames expire inside a block that stays (its last frame is not expired): nothing is
    # deleted, but they are hidden at once, so that pass commits the watermark.
    clock.t = T0 + 2100
    store.retain()
    assert commits_seen(watcher) != version
    assert store.expired_before() == T0 + 100
    with JournalReader(tmp_path) as reader:
        assert reader.time_range() == (T0 + 100, T0 + 1499)
    # The frame at T0 + 100 expires: hidden at once.
    clock.t = T0 + 2100.5
    store.retain()
    assert store.expired_before() == T0 + 100.5
    # The watermark does not move over a stretch holding no frame (frames are 1 s apart).
    version = commits_seen(watcher)
    clock.t = T0 + 2100.9
    store.retain()
    assert commits_seen(watcher) == version and store.expired_before() == T0 + 100.5
    with JournalReader(tmp_path) as reader:
        assert reader.time_range() == (T0 + 101, T0 + 1499)
    watcher.close()
    store.close()


def test_retention_gives_free_pages_back_beyond_a_slack_a_bounded_number_per_pass(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    store = filled(tmp_path, 6000, clock, retention=Retention(frames_keep_s=500))
    store.compact(max_blocks=100)
    page = int(store.conn.execute("PRAGMA page_size").fetchone()[0])
    monkeypatch.setattr(upkeep, "VACUUM_SLACK_BYTES", 2 * page)
    monkeypatch.setattr(upkeep, "VACUUM_MAX_BYTES", 5 * page)

    def pages() -> tuple[int, int]:
        return (int(store.conn.execute("PRAGMA page_count").fetchone()[0]),
                int(store.conn.execute("PRAGMA freelist_count").fetchone()[0]))

    store.conn.executescript("PRAGMA incremental_vacuum;")  # what compaction freed
    total, free = pages()
    assert free == 0
    store.retain()  # all but the last 500 frames expire: their blocks go
    after, free = pages()
    assert free > 2 and after == total - 5
    while free > 2:
        before = pages()
        store.retain()
        after, free = pages()
        assert free == max(2, before[1] - 5) and after == before[0] - (before[1] - free)
    # Within the slack: nothing more to give back, and nothing is committed.
    store.retain()
    assert pages() == (after, 2)
    store.close()


def test_size_cap_drops_the_oldest_blocks_first(tmp_path: Path) -> None:
    clock = FakeClock()
    store = filled(tmp_path, 6000, clock)
    store.compact(max_blocks=100)
    cap = store.used_bytes() // 2
    store.retention = Retention(max_bytes=cap)
    store.retain()
    assert store.used_bytes() <= cap
    first, last = store.time_range() or (0.0, 0.0)
    assert first > T0 and last == T0 + 5999
    assert store.count_frames(T0, T0 + 5999) == T0 + 6000 - first
    store.close()


def test_a_failed_compaction_keeps_every_frame(tmp_path: Path) -> None:
    store = filled(tmp_path, 1000)
    before = store.frames_json(T0, T0 + 999)
    pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
    store.conn.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full
    with pytest.raises(sqlite3.OperationalError, match="full"):
        store.compact()
    assert store.frames_json(T0, T0 + 999) == before
    store.close()


def test_a_reader_never_sees_a_frame_twice_or_misses_one_during_compaction(tmp_path: Path) -> None:
    store = filled(tmp_path, 3000, block_frames=20)
    seen: list[int] = []
    stop = threading.Event()

    def read() -> None:
        with JournalReader(tmp_path) as reader:
            while not stop.is_set():
                seen.append(reader.count_frames(T0, T0 + 2999))
                seen.append(len(reader.frames_json(T0 + 1000, T0 + 1999)))

    thread = threading.Thread(target=read)
    thread.start()
    try:
        while store.compact(max_blocks=1):
            time.sleep(0.001)
    finally:
        stop.set()
        thread.join()
    assert table_counts(store)[0] > 2900
    assert len(seen) > 10 and set(seen) == {3000, 1000}
    store.close()


def test_encode_history_is_encode() -> None:
    from rigmon.schema import Event, HistorySeries

    history = History(schema=1, node='n"1', from_at=1.5, to_at=2.0, tier="60s", step_s=60.0,
                      series={"b.x_w": HistorySeries(at=(1.0, 2.0), min=(0.1, -3.0), mean=(0.2, 1e-9), max=(3.0, 1e300)),
                              "a": HistorySeries(at=(), min=(), mean=(), max=())},
                      events=(Event(id="e", at=1.0, kind="k", severity="info", subject="s",
                                    message='"series":{} in a message'),), more=True)
    assert encode_history(history) == encode(history)


# --- kill -9 while frames are written and recompressed ----------------------------------

CHILD = textwrap.dedent("""
    import sys, time
    from rigmon.agent.journal import JournalStore
    from tests.agent.journal_frames import T0, FakeClock, frame
    clock = FakeClock()
    store = JournalStore(sys.argv[1], clock, block_frames=7, block_after_s=3.0)
    seq = int(sys.argv[2])
    while True:
        seq += 1
        clock.t = T0 + seq
        store.write([frame(seq, T0 + seq, float(seq % 11))])
        print(seq, flush=True)
        if seq % 5 == 0:
            store.maintain()
""")


@pytest.mark.slow
def test_kill_9_during_compaction_loses_nothing_committed(tmp_path: Path) -> None:
    import random

    rng = random.Random(5)
    db = tmp_path / "journal.sqlite3"
    committed = 0
    for _ in range(6):
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), str(committed)],
                                stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
        assert proc.stdout is not None
        target = committed + rng.randrange(40, 120)
        last = committed
        for line in proc.stdout:
            last = int(line)
            if last >= target:
                break
        # Some more writes and compactions in flight, then the kill.
        time.sleep(rng.uniform(0.0, 0.05))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        conn = sqlite3.connect(db)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
        with JournalReader(db) as reader:
            seqs = [json.loads(raw)["seq"] for raw in reader.frames_json(T0, T0 + 10**6)]
            blocks = reader.conn.execute("SELECT COUNT(*) FROM blocks").fetchone()[0]
        # Every frame printed as committed is there, once, in order; nothing else is.
        assert seqs[:last] == list(range(1, last + 1))
        assert seqs == list(range(1, len(seqs) + 1))
        committed = len(seqs)
    assert blocks > 10


def test_a_block_is_its_streams_rows_as_written_and_a_stream_left_open_is_finished(tmp_path: Path) -> None:
    from rigmon.agent.frame_json import frame_json

    store = filled(tmp_path, 650)
    rows = store.conn.execute("SELECT stream, body FROM frames ORDER BY id").fetchall()
    store.close()
    # A new writer (as after a kill -9): the third stream was left open, 50 frames long.
    clock = FakeClock(T0 + 650 + BLOCK_FLUSH_S)
    store = JournalStore(tmp_path, clock)
    try:
        assert store.compact() == 3
        blocks = [body for (body,) in store.conn.execute("SELECT body FROM blocks ORDER BY id")]
    finally:
        store.close()
    streams = sorted({stream for stream, _ in rows})
    written = [b"".join(body for stream, body in rows if stream == s) for s in streams]
    # Compressed once: the full blocks are the rows' bytes, not a second compression of them.
    assert blocks[:2] == written[:2]
    assert blocks[2].startswith(written[2]) and len(blocks[2]) == len(written[2]) + 10
    raws = [frame_json(frame(i + 1, T0 + i, float(i % 37))) for i in range(650)]
    assert [gzip.decompress(b) for b in blocks] == [b"".join(r + b"\n" for r in raws[i:i + 300])
                                                     for i in (0, 300, 600)]


def spoil(store: JournalStore, table: str, row_id: int) -> None:
    """Bytes of a stored body go bad on the disk; SQLite's pages stay sound (quick_check passes)."""
    body = bytearray(store.conn.execute(f"SELECT body FROM {table} WHERE id = ?", (row_id,)).fetchone()[0])
    mid = len(body) // 2
    body[mid:mid + 16] = bytes(16)
    with store.conn:
        store.conn.execute(f"UPDATE {table} SET body = ? WHERE id = ?", (bytes(body), row_id))
    assert store.conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]


def test_a_block_whose_bytes_went_bad_is_left_out_of_every_answer_and_said(tmp_path: Path) -> None:
    store = filled(tmp_path, 1000, block_frames=100)
    store.compact()
    every = store.frames_json(T0, T0 + 999)
    assert gzip.decompress(store.frames_gzip(T0, T0 + 999).body).splitlines() == every  # checked sound once
    spoil(store, "blocks", 3)  # frames 201-300: spoilt afterwards, checked again
    store.close()
    with JournalReader(tmp_path) as reader:
        expected = every[:200] + every[300:]
        # Never a corrupt gzip passed on as stored: the whole answer decompresses.
        exported = reader.frames_gzip(T0, T0 + 999)
        assert gzip.decompress(exported.body).splitlines() == expected and exported.count == 900
        assert reader.frames_json(T0, T0 + 999) == expected
        assert len(reader.unreadable) == 2 and "a block of 100 frames" in reader.unreadable[0]
        history = reader.history("n1", T0, T0 + 999, 1.0)
        assert len(history.series["host.cpu_pct"].at) == 900


def test_a_stream_whose_bytes_went_bad_does_not_stop_maintenance(tmp_path: Path) -> None:
    clock = FakeClock()
    store = JournalStore(tmp_path, clock, block_frames=50)
    for start in range(0, 300, 50):
        store.write([frame(i + 1, T0 + i, float(i % 37)) for i in range(start, start + 50)])
    every = store.frames_json(T0, T0 + 299)
    second = store.conn.execute("SELECT DISTINCT stream FROM frames ORDER BY stream").fetchall()[1][0]
    spoil(store, "frames", second + 10)  # a row in the middle of frames 51-100
    clock.t = T0 + 1000
    store.maintain()  # used to fail here, and at every pass after
    # Every other stream became a block; the spoilt one waits for retention, left out of answers.
    assert store.conn.execute("SELECT COUNT(*) FROM blocks").fetchone()[0] == 5
    assert store.frames_json(T0, T0 + 299) == every[:50] + every[100:]
    assert any("a frame stream of 50 frames" in u for u in store.unreadable)
    store.close()
