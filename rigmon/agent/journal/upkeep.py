"""A journal's upkeep: frames into blocks (compaction), then retention by age and by size."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from rigmon.agent.journal.blocks import (
    BLOCK_FLUSH_S,
    BLOCK_LEVEL,
    MAX_BLOCKS_PER_PASS,
    gzip_member,
    pack_times,
    seal_stream,
    unpack_times,
)
from rigmon.agent.journal.layout import JournalError
from rigmon.agent.journal.reader import JournalReader
from rigmon.agent.journal.tiers import TIERS_S
from rigmon.clock import Clock
from rigmon.config import JournalSection

#: Free pages the file keeps for the writer to reuse (compaction frees about a block's rows at a
#: time, and the next frames fill them again): giving them back would only grow the file again.
VACUUM_SLACK_BYTES = 8 * 1024 * 1024
#: Free pages given back to the file system per retention pass at most: giving a page back may
#: move another (a whole cap's worth after a size-cap purge), all on the writer's thread.
VACUUM_MAX_BYTES = 4 * 1024 * 1024


def go_on_always() -> bool:
    """The ``go_on`` of upkeep that nothing cuts short."""
    return True


class Retention(msgspec.Struct, frozen=True, gc=False):
    """How long each kind of data is kept, and the size cap of the file.

    Attributes:
        frames_keep_s: whole frames.
        tier_keep_s: per bucket width (seconds) of `TIERS_S`, how long its buckets stay.
        max_bytes: the file's used pages; beyond it the oldest data goes first.
    """

    frames_keep_s: float = 48 * 3600.0
    tier_keep_s: dict[int, float] = msgspec.field(default_factory=lambda: {60: 30 * 86400.0, 900: 400 * 86400.0})
    max_bytes: int = 2048 * 1024 * 1024

    @classmethod
    def from_config(cls, section: JournalSection) -> Retention:
        """Retention from the ``[journal]`` section."""
        return cls(
            frames_keep_s=section.frames_keep_h * 3600.0,
            tier_keep_s={60: section.minute_keep_h * 3600.0, 900: section.quarter_keep_h * 3600.0},
            max_bytes=int(section.max_mb * 1024 * 1024),
        )

    @property
    def events_keep_s(self) -> float:
        """Events stay as long as the longest-kept tier."""
        return max([self.frames_keep_s, *self.tier_keep_s.values()])


class JournalUpkeep(JournalReader):
    """What the writer does to what it wrote: frames into blocks, then retention by age and by size.

    The base of `JournalStore`, which sets these attributes; compaction and retention end the
    writer's open block stream (``_stream``, ``_stream_id``) when its rows move or go.
    """

    clock: Clock
    retention: Retention
    block_frames: int
    block_after_s: float
    _stream: Any
    _stream_id: int | None

    def compact(self, max_blocks: int = MAX_BLOCKS_PER_PASS, go_on: Callable[[], bool] = go_on_always) -> int:
        """Move frames older than `BLOCK_AFTER_S` into blocks; returns how many blocks were written.

        A block holds consecutive frames (by id) of one run: `BLOCK_FRAMES` of them, or fewer
        when a later run has begun or its first frame waited `BLOCK_FLUSH_S`. Each block is
        one transaction: insert the block, delete its frames, so a crash leaves them in one
        place or the other. Format 3's frames are in blocks already, compressed (one stream
        per block, see `write_encoded`): moving them copies bytes; rows of format 2 are
        recompressed as that format did. ``go_on`` is asked before each block: no more once it says no.
        """
        now = self.clock.time()
        cutoff = now - self.block_after_s
        written = 0
        size = self.block_frames
        while written < max_blocks and go_on():
            # Rows of format 2 (each frame compressed against a dictionary), left by an older agent.
            rows = self.conn.execute(
                "SELECT id, taken_at, run_id, seq, dict_id, body FROM frames WHERE stream IS NULL ORDER BY id LIMIT ?",
                (size + 1,)).fetchall()
            chunk: list[tuple[Any, ...]] = []
            for row in rows:
                if row[1] >= cutoff or (chunk and row[2] != chunk[0][2]) or len(chunk) == size:
                    break
                chunk.append(row)
            if not chunk:
                break
            # No row of format 2 is written any more: the last of them end their run's block.
            ended = (len(chunk) < len(rows) and rows[len(chunk)][2] != chunk[0][2]) or len(chunk) == len(rows)
            if len(chunk) < size and not ended and chunk[0][1] >= cutoff - BLOCK_FLUSH_S:
                break
            self._write_block(chunk)
            written += 1
        return written + self._compact_streams(cutoff, max_blocks - written, go_on)

    def _compact_streams(self, cutoff: float, max_blocks: int, go_on: Callable[[], bool]) -> int:
        """Streams whose frames are all older than ``cutoff`` become blocks, as they are.

        A stream still open in this writer waits until it is full, unless its first frame has
        waited `BLOCK_FLUSH_S` (slow frame intervals): then it is closed here and the next frame
        opens a new one. Streams left open by an earlier run, a failed write or another run are
        finished by `seal_stream`.
        """
        streams = self.conn.execute(
            "SELECT stream, MIN(taken_at), MAX(taken_at) FROM frames WHERE stream IS NOT NULL "
            "GROUP BY stream ORDER BY stream").fetchall()
        written = 0
        for stream, first_at, last_at in streams:
            if written >= max_blocks or not go_on():
                break
            if last_at >= cutoff:
                continue
            current = self._stream is not None and stream == self._stream_id
            if current:
                if first_at >= cutoff - BLOCK_FLUSH_S:
                    continue
                self._stream = None
            rows = self.conn.execute(
                "SELECT id, taken_at, run_id, seq, body FROM frames WHERE id >= ? AND stream = ? ORDER BY id",
                (stream, stream)).fetchall()
            try:
                body = seal_stream(b"".join(r[4] for r in rows))
            except JournalError:
                # Its bytes went bad on the disk: readers leave it out (and say so); it stays
                # until retention, rather than stop every later stream from becoming a block.
                continue
            self._insert_block(rows, body)
            written += 1
        return written

    def _insert_block(self, rows: Sequence[tuple[Any, ...]], body: bytes) -> None:
        """Insert a block made of ``rows`` (id, taken_at, run_id, seq, ...) and delete them, in one transaction."""
        times = [float(r[1]) for r in rows]
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute(
                "INSERT INTO blocks(min_at, max_at, run_id, frames, first_seq, last_seq, taken_at, body) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (min(times), max(times), rows[0][2], len(rows), rows[0][3], rows[-1][3], pack_times(times), body))
            self.conn.execute("DELETE FROM frames WHERE id >= ? AND id <= ?", (rows[0][0], rows[-1][0]))

    def _write_block(self, chunk: Sequence[tuple[Any, ...]]) -> None:
        times = [float(r[1]) for r in chunk]
        raw = b"".join(self._frame_json(r[4], r[5]) + b"\n" for r in chunk)
        body = gzip_member(raw, BLOCK_LEVEL)
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute(
                "INSERT INTO blocks(min_at, max_at, run_id, frames, first_seq, last_seq, taken_at, body) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (min(times), max(times), chunk[0][2], len(chunk), chunk[0][3], chunk[-1][3], pack_times(times), body))
            self.conn.execute("DELETE FROM frames WHERE id >= ? AND id <= ? AND stream IS NULL",
                              (chunk[0][0], chunk[-1][0]))
            self._drop_unused_dicts()

    def used_bytes(self) -> int:
        """Bytes of the file's pages in use (free pages excluded)."""
        page_size = self.conn.execute("PRAGMA page_size").fetchone()[0]
        pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
        free = self.conn.execute("PRAGMA freelist_count").fetchone()[0]
        return int((pages - free) * page_size)

    def retain(self, go_on: Callable[[], bool] = go_on_always) -> None:
        """Delete what is older than its retention, then the oldest data while over the size cap.

        Commits only when it changed something: rows deleted, or ``frames:expired_before`` moved
        past a frame still stored (in a block or a stream that is not deleted yet), which hides it
        from readers at once. A pass that finds nothing to do (a journal younger than its
        retention) rolls back and writes nothing: with ``synchronous = FULL`` every commit costs a
        WAL write and an fsync, and nothing here needs one. Moving the watermark over a stretch
        holding no frame changes nothing a reader sees, so it is not written. Free pages go back to
        the file system beyond a slack the writer reuses (`_give_back_pages`). ``go_on`` is asked
        before each transaction after the first: none more once it says no.
        """
        now = self.clock.time()
        r = self.retention
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            changes = conn.total_changes
            expired = now - r.frames_keep_s
            # A stream goes whole, with its last frame: its rows decompress only from its first.
            conn.execute(
                "DELETE FROM frames WHERE taken_at < :e AND (stream IS NULL OR stream IN "
                "(SELECT stream FROM frames WHERE stream IS NOT NULL GROUP BY stream HAVING MAX(taken_at) < :e))",
                {"e": expired})
            # A block goes with its last frame; until then readers skip its expired frames.
            conn.execute("DELETE FROM blocks WHERE max_at < ?", (expired,))
            since = self.expired_before()
            if since is None or expired > since:
                if self._holds_frames(-math.inf if since is None else since, expired):
                    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('frames:expired_before', ?)",
                                 (repr(expired),))
            conn.execute("DELETE FROM events WHERE at < ?", (now - r.events_keep_s,))
            for step in TIERS_S:
                keep = r.tier_keep_s.get(step, r.events_keep_s)
                conn.execute("DELETE FROM buckets WHERE step_s = ? AND start_at < ?", (step, now - keep))
            self._drop_unused_dicts()
            conn.execute("COMMIT" if conn.total_changes != changes else "ROLLBACK")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if self._stream_id is not None and self.conn.execute(
                "SELECT 1 FROM frames WHERE id = ?", (self._stream_id,)).fetchone() is None:
            # Its first rows are gone: the next frame opens a new stream.
            self._stream = None
        # (The size cap forgets the open stream itself when it deletes its rows.)
        self._enforce_size(go_on)
        if go_on():
            self._give_back_pages()

    def _holds_frames(self, lo: float, hi: float) -> bool:
        """Whether a frame taken in ``[lo, hi)`` is stored (in the frames table or a block)."""
        if self.conn.execute("SELECT 1 FROM frames WHERE taken_at >= ? AND taken_at < ? LIMIT 1",
                             (lo, hi)).fetchone() is not None:
            return True
        # Blocks that overlap the stretch: their frames' own times (a block may span a gap).
        for (blob,) in self.conn.execute("SELECT taken_at FROM blocks WHERE max_at >= ? AND min_at < ?", (lo, hi)):
            if any(lo <= t < hi for t in unpack_times(blob)):
                return True
        return False

    def _give_back_pages(self) -> None:
        """Truncate the file by its free pages beyond `VACUUM_SLACK_BYTES`, `VACUUM_MAX_BYTES` at most."""
        page_size = int(self.conn.execute("PRAGMA page_size").fetchone()[0])
        free = int(self.conn.execute("PRAGMA freelist_count").fetchone()[0])
        pages = min(free - VACUUM_SLACK_BYTES // page_size, VACUUM_MAX_BYTES // page_size)
        if pages > 0:
            # ``execute`` steps this pragma once, which gives back one page (whatever its
            # argument); ``executescript`` runs it to the end, in one transaction.
            self.conn.executescript(f"PRAGMA incremental_vacuum({pages});")

    def _drop_unused_dicts(self) -> None:
        # Only rows of format 2 use dictionaries; this writer makes none.
        oldest = self.conn.execute("SELECT MIN(dict_id) FROM frames").fetchone()[0]
        if oldest is None:
            self.conn.execute("DELETE FROM dicts")
        else:
            self.conn.execute("DELETE FROM dicts WHERE id < ?", (oldest,))

    def _enforce_size(self, go_on: Callable[[], bool]) -> None:
        target = int(self.retention.max_bytes * 0.9)
        if self.used_bytes() <= self.retention.max_bytes:
            return
        # Oldest frames first (blocks hold the oldest), then the finest tier's oldest buckets,
        # then coarser, then events.
        victims = [
            (2, "SELECT id FROM blocks ORDER BY id LIMIT ?", "DELETE FROM blocks WHERE id IN ({})"),
            # Rows of format 2 (older than any stream), then the oldest stream, always whole: a
            # stream decompresses only from its first row (LIMIT -1: no limit).
            (256, "SELECT id FROM frames WHERE stream IS NULL ORDER BY id LIMIT ?", "DELETE FROM frames WHERE id IN ({})"),
            (-1, "SELECT id FROM frames WHERE stream = (SELECT MIN(stream) FROM frames) LIMIT ?",
             "DELETE FROM frames WHERE id IN ({})"),
            *[(256, f"SELECT start_at FROM buckets WHERE step_s = {s} ORDER BY start_at LIMIT ?",
               f"DELETE FROM buckets WHERE step_s = {s} AND start_at IN ({{}})") for s in TIERS_S],
            (256, "SELECT rowid FROM events ORDER BY at LIMIT ?", "DELETE FROM events WHERE rowid IN ({})"),
        ]
        for batch, select, delete in victims:
            while self.used_bytes() > target:
                if not go_on():
                    return
                keys = [row[0] for row in self.conn.execute(select, (batch,))]
                if not keys:
                    break
                with self.conn:
                    self.conn.execute("BEGIN IMMEDIATE")
                    self.conn.execute(delete.format(",".join("?" * len(keys))), keys)
                    if select.startswith("SELECT id FROM frames"):
                        if self._stream_id in keys:
                            self._stream = None
                        self._drop_unused_dicts()
            if self.used_bytes() <= target:
                return
