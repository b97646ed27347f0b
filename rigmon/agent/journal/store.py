"""The writer's side of a journal: schema, writing frames, blocks, downsampling, retention, size."""

from __future__ import annotations

import math
import sqlite3
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rigmon.agent.frame_json import frame_json
from rigmon.agent.journal.blocks import (
    BLOCK_AFTER_S,
    BLOCK_FLUSH_S,
    BLOCK_FRAMES,
    BLOCK_LEVEL,
    DICT_ROTATE_S,
    MAX_BLOCKS_PER_PASS,
    ZDICT_MAX_BYTES,
    gzip_member,
    pack_times,
    primed_compressor,
)
from rigmon.agent.journal.damage import JournalDamaged, is_damage
from rigmon.agent.journal.layout import (
    FORMAT_VERSION,
    SCHEMA_SQL,
    JournalError,
    journal_path,
)
from rigmon.agent.journal.reader import JournalReader
from rigmon.agent.journal.runs import UncleanRun
from rigmon.agent.journal.tiers import (
    MAX_BUCKETS_PER_PASS,
    TIERS_S,
    encode_bucket,
    floor_to,
)
from rigmon.clock import Clock
from rigmon.config import JournalSection
from rigmon.schema import Event, Frame, encode


@dataclass(frozen=True, slots=True)
class Retention:
    """How long each kind of data is kept, and the size cap of the file.

    Attributes:
        frames_keep_s: whole frames.
        tier_keep_s: per bucket width (seconds) of `TIERS_S`, how long its buckets stay.
        max_bytes: the file's used pages; beyond it the oldest data goes first.
    """

    frames_keep_s: float = 48 * 3600.0
    tier_keep_s: dict[int, float] = field(default_factory=lambda: {60: 30 * 86400.0, 900: 400 * 86400.0})
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


class JournalStore(JournalReader):
    """The writer's side of a journal: one connection, used by one thread.

    Args:
        path: the journal file (or its state directory, created if needed).
        clock: wall time for retention (the simulator's or a test's clock).
        retention: what to keep.
        block_frames: frames per block (`BLOCK_FRAMES`; smaller in tests).
        block_after_s: age at which frames go into blocks (`BLOCK_AFTER_S`).

    Raises:
        JournalError: the directory or file cannot be created or opened.
    """

    def __init__(self, path: str | Path, clock: Clock, retention: Retention | None = None,
                 block_frames: int = BLOCK_FRAMES, block_after_s: float = BLOCK_AFTER_S) -> None:
        target = journal_path(path)
        conn: sqlite3.Connection | None = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(target, timeout=5.0, isolation_level=None)
            # Incremental auto-vacuum must be chosen before the first table exists; it lets
            # retention give pages back to the file system.
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise JournalError(f"{target}: cannot use WAL mode (got {mode})")
            # FULL: a commit reaches the disk before it returns, so a power cut loses only
            # what was not yet committed (at most one commit interval).
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA journal_size_limit = 16777216")
            # One transaction: in autocommit each CREATE would commit on its own, and a reader
            # (an API request just after the start) could find some tables and not others.
            # With the format row in the same transaction, a journal that has it has them all.
            conn.executescript(f"BEGIN IMMEDIATE;\n{SCHEMA_SQL}\nINSERT OR REPLACE INTO meta(key, value) "
                               f"VALUES ('format', '{int(FORMAT_VERSION)}');\nCOMMIT;")
        except (sqlite3.Error, OSError) as exc:
            if conn is not None and conn.in_transaction:
                try:
                    conn.rollback()
                except sqlite3.Error:
                    pass
            kind = JournalDamaged if is_damage(exc) else JournalError
            raise kind(f"cannot open journal {target}: {exc}") from None
        super().__init__(target, conn)
        self.clock = clock
        self.retention = retention or Retention()
        self.block_frames = block_frames
        self.block_after_s = block_after_s
        self._dict_id: int | None = None
        self._dict_bytes: bytes | None = None
        self._dict_at = 0.0
        #: A compressor that has taken in the current dictionary; each frame compresses with a
        #: copy of it (the same bytes as `compress`, without hashing the 32 KiB dictionary again).
        self._dict_primed: Any = None

    def close(self) -> None:
        """Close the connection (the last one checkpoints and removes the WAL file)."""
        self.conn.close()

    def begin_run(self, run_id: str, node: str, started_at: float, info_json: str | None = None,
                  config_json: str | None = None) -> list[UncleanRun]:
        """Record the start of a run; return earlier runs that never stopped cleanly.

        Those runs are marked as ended at their last frame, so each is reported once.
        """
        unclean: list[UncleanRun] = []
        rows = self.conn.execute(
            "SELECT run_id, node, started_at FROM runs WHERE stopped_at IS NULL AND run_id != ? ORDER BY started_at",
            (run_id,)).fetchall()
        for prev_id, prev_node, prev_start in rows:
            last, final = self.final_readings(prev_id)
            unclean.append(UncleanRun(prev_id, prev_node, float(prev_start), last, final))
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            for u in unclean:
                self.conn.execute("UPDATE runs SET stopped_at = ?, clean = 0 WHERE run_id = ?",
                                  (u.last_frame_at if u.last_frame_at is not None else u.started_at, u.run_id))
            self.conn.execute(
                "INSERT OR REPLACE INTO runs(run_id, node, started_at, stopped_at, clean, info, config) "
                "VALUES (?, ?, ?, NULL, NULL, ?, ?)", (run_id, node, started_at, info_json, config_json))
        return unclean

    def end_run(self, run_id: str, stopped_at: float) -> None:
        """Record a clean stop of the run."""
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute("UPDATE runs SET stopped_at = ?, clean = 1 WHERE run_id = ?", (stopped_at, run_id))

    def write(self, frames: Sequence[Frame], events: Sequence[tuple[str, Event]] = ()) -> None:
        """Write frames and their events in one transaction.

        Args:
            frames: the frames; their events are written with them.
            events: more events as ``(run_id, event)``: those of frames that could not be
                written earlier (an event already stored is replaced, not doubled).

        Raises:
            sqlite3.Error: the write failed (disk full, I/O error); nothing of it is kept.
        """
        encoded = [(f, frame_json(f)) for f in frames]
        self.write_encoded(encoded, events)

    def write_encoded(self, frames: Iterable[tuple[Frame, bytes]], events: Sequence[tuple[str, Event]] = ()) -> None:
        """Like `write` for frames already encoded as wire JSON."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for frame, raw in frames:
                if (self._dict_bytes is None or frame.taken_at - self._dict_at > DICT_ROTATE_S
                        or frame.taken_at < self._dict_at):
                    zdict = raw[-ZDICT_MAX_BYTES:]
                    cur = conn.execute("INSERT INTO dicts(body) VALUES (?)", (zlib.compress(zdict, 9),))
                    self._dict_id, self._dict_bytes, self._dict_at = cur.lastrowid, zdict, frame.taken_at
                    self._dict_primed = primed_compressor(zdict)
                comp = self._dict_primed.copy()
                conn.execute("INSERT INTO frames(taken_at, run_id, seq, dict_id, body) VALUES (?, ?, ?, ?, ?)",
                             (frame.taken_at, frame.run_id, frame.seq, self._dict_id,
                              comp.compress(raw) + comp.flush()))
                for event in frame.events:
                    self._insert_event(frame.run_id, event)
            for run_id, event in events:
                self._insert_event(run_id, event)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            # The dictionary row may have been rolled back with the frames.
            self._dict_id = self._dict_bytes = self._dict_primed = None
            raise

    def _insert_event(self, run_id: str, event: Event) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO events(id, at, run_id, kind, severity, body) VALUES (?, ?, ?, ?, ?, ?)",
            (event.id, event.at, run_id, event.kind, event.severity, encode(event).decode()))

    def maintain(self) -> None:
        """Downsample complete buckets, apply retention by age and by size, then write blocks."""
        self.downsample()
        self.retain()
        self.compact()

    def compact(self, max_blocks: int = MAX_BLOCKS_PER_PASS) -> int:
        """Move frames older than `BLOCK_AFTER_S` into blocks; returns how many blocks were written.

        A block holds consecutive frames (by id) of one run: `BLOCK_FRAMES` of them, or fewer
        when a later run has begun or its first frame waited `BLOCK_FLUSH_S`. Each block is
        one transaction: insert the block, delete its frames, so a crash leaves them in one
        place or the other.
        """
        now = self.clock.time()
        cutoff = now - self.block_after_s
        size = self.block_frames
        written = 0
        while written < max_blocks:
            rows = self.conn.execute(
                "SELECT id, taken_at, run_id, seq, dict_id, body FROM frames ORDER BY id LIMIT ?",
                (size + 1,)).fetchall()
            chunk: list[tuple[Any, ...]] = []
            for row in rows:
                if row[1] >= cutoff or (chunk and row[2] != chunk[0][2]) or len(chunk) == size:
                    break
                chunk.append(row)
            if not chunk:
                break
            ended = len(chunk) < len(rows) and rows[len(chunk)][2] != chunk[0][2]
            if len(chunk) < size and not ended and chunk[0][1] >= cutoff - BLOCK_FLUSH_S:
                break
            self._write_block(chunk)
            written += 1
        return written

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
            self.conn.execute("DELETE FROM frames WHERE id >= ? AND id <= ?", (chunk[0][0], chunk[-1][0]))

    def downsample(self) -> None:
        """Store the tiers' complete buckets past their watermarks (bounded work per call)."""
        for tier, step in enumerate(TIERS_S):
            if tier == 0:
                span = self.time_range()
                if span is None:
                    continue
                source_start, source_end = span
            else:
                finer_mark = self.watermark(TIERS_S[tier - 1])
                first = self.conn.execute("SELECT MIN(start_at) FROM buckets WHERE step_s = ?",
                                          (TIERS_S[tier - 1],)).fetchone()[0]
                if finer_mark is None or first is None:
                    continue
                source_start, source_end = float(first), finer_mark
            mark = self.watermark(step)
            start = floor_to(source_start, step) if mark is None else mark
            end = min(floor_to(source_end, step), start + step * MAX_BUCKETS_PER_PASS)
            if end <= start:
                continue
            buckets = self.compute_buckets(tier, start, end)
            with self.conn:
                self.conn.execute("BEGIN IMMEDIATE")
                for at, stats in buckets:
                    self.conn.execute("INSERT OR REPLACE INTO buckets(step_s, start_at, body) VALUES (?, ?, ?)",
                                      (step, at, encode_bucket(stats)))
                self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                                  (f"tier:{step}:until", repr(end)))

    def used_bytes(self) -> int:
        """Bytes of the file's pages in use (free pages excluded)."""
        page_size = self.conn.execute("PRAGMA page_size").fetchone()[0]
        pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
        free = self.conn.execute("PRAGMA freelist_count").fetchone()[0]
        return int((pages - free) * page_size)

    def retain(self) -> None:
        """Delete what is older than its retention, then the oldest data while over the size cap."""
        now = self.clock.time()
        r = self.retention
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            expired = now - r.frames_keep_s
            self.conn.execute("DELETE FROM frames WHERE taken_at < ?", (expired,))
            # A block goes with its last frame; until then readers skip its expired frames.
            self.conn.execute("DELETE FROM blocks WHERE max_at < ?", (expired,))
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('frames:expired_before', ?)",
                              (repr(max(expired, self.expired_before() or -math.inf)),))
            self.conn.execute("DELETE FROM events WHERE at < ?", (now - r.events_keep_s,))
            for step in TIERS_S:
                keep = r.tier_keep_s.get(step, r.events_keep_s)
                self.conn.execute("DELETE FROM buckets WHERE step_s = ? AND start_at < ?", (step, now - keep))
            self._drop_unused_dicts()
        self._enforce_size()
        self.conn.execute("PRAGMA incremental_vacuum")

    def _drop_unused_dicts(self) -> None:
        oldest = self.conn.execute("SELECT MIN(dict_id) FROM frames").fetchone()[0]
        keep_from = oldest if oldest is not None else self._dict_id
        if keep_from is not None:
            self.conn.execute("DELETE FROM dicts WHERE id < ?", (keep_from,))

    def _enforce_size(self) -> None:
        target = int(self.retention.max_bytes * 0.9)
        if self.used_bytes() <= self.retention.max_bytes:
            return
        # Oldest frames first (blocks hold the oldest), then the finest tier's oldest buckets,
        # then coarser, then events.
        victims = [
            (2, "SELECT id FROM blocks ORDER BY id LIMIT ?", "DELETE FROM blocks WHERE id IN ({})"),
            (256, "SELECT id FROM frames ORDER BY id LIMIT ?", "DELETE FROM frames WHERE id IN ({})"),
            *[(256, f"SELECT start_at FROM buckets WHERE step_s = {s} ORDER BY start_at LIMIT ?",
               f"DELETE FROM buckets WHERE step_s = {s} AND start_at IN ({{}})") for s in TIERS_S],
            (256, "SELECT rowid FROM events ORDER BY at LIMIT ?", "DELETE FROM events WHERE rowid IN ({})"),
        ]
        for batch, select, delete in victims:
            while self.used_bytes() > target:
                keys = [row[0] for row in self.conn.execute(select, (batch,))]
                if not keys:
                    break
                with self.conn:
                    self.conn.execute("BEGIN IMMEDIATE")
                    self.conn.execute(delete.format(",".join("?" * len(keys))), keys)
                    if select.startswith("SELECT id FROM frames"):
                        self._drop_unused_dicts()
            if self.used_bytes() <= target:
                return

