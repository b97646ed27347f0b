"""The writer's side of a journal: schema, writing frames into block streams, the tiers (compaction and
retention: `upkeep`)."""

from __future__ import annotations

import math
import sqlite3
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from rigmon.agent.frame_json import frame_json
from rigmon.agent.journal.blocks import BLOCK_AFTER_S, BLOCK_FRAMES, stream_compressor
from rigmon.agent.journal.damage import JournalDamaged, is_damage
from rigmon.agent.journal.layout import (
    FORMAT_VERSION,
    SCHEMA_SQL,
    UPGRADE_SQL,
    JournalError,
    journal_path,
)
from rigmon.agent.journal.rollup import Rollup
from rigmon.agent.journal.runs import UncleanRun
from rigmon.agent.journal.tiers import (
    MAX_BUCKETS_PER_PASS,
    TIERS_S,
    encode_bucket,
    floor_to,
)
from rigmon.agent.journal.upkeep import JournalUpkeep, Retention, go_on_always
from rigmon.clock import Clock
from rigmon.schema import Event, Frame, Readings, SchemaError, decode, encode
from rigmon.series import Stats, merge_stats

#: Committed frames that wait for the tiers' open buckets at most (maintenance takes them once
#: their minute has ended: 60 at 1 Hz).
MAX_PENDING_FRAMES = 120


class _FrameReadings(msgspec.Struct):
    """A frame's JSON as the tiers need it: its readings; other keys are skipped without building objects."""

    readings: Any = None


_readings_decoder = msgspec.json.Decoder(_FrameReadings)


def _newer_format(conn: sqlite3.Connection) -> str | None:
    """The journal's format when it is newer than `FORMAT_VERSION` (``None``: not newer, or a new file)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone() is None:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
    if row is None:
        return None
    try:
        return None if int(row[0]) <= FORMAT_VERSION else str(row[0])
    except ValueError:
        return str(row[0])


def _state_dir(target: Path, make: bool) -> None:
    """Make sure the journal's directory exists: create it when ``make`` (only it, not its parents).

    A removed state directory (its owner's, at the owner's end: the simulator's temporary
    directory) created again, with its parents, was left behind with a journal in it.

    Raises:
        JournalError: it is missing and ``make`` is false, or the directory above it is missing.
        OSError: it cannot be created.
    """
    state_dir = target.parent
    if state_dir.is_dir():
        return
    if not make:
        raise JournalError(f"cannot open journal {target}: its state directory {state_dir} is gone (removed while "
                           "the agent ran); the journal does not create it again")
    try:
        state_dir.mkdir()
    except FileExistsError:
        if not state_dir.is_dir():
            raise
    except FileNotFoundError:
        raise JournalError(f"cannot open journal {target}: {state_dir.parent} does not exist; the journal creates "
                           f"its state directory {state_dir}, not the directories above it") from None


class JournalStore(JournalUpkeep):
    """The writer's side of a journal: one connection, used by one thread.

    Args:
        path: the journal file (or its state directory).
        clock: wall time for retention (the simulator's or a test's clock).
        retention: what to keep.
        block_frames: frames per block (`BLOCK_FRAMES`; smaller in tests).
        block_after_s: age at which frames go into blocks (`BLOCK_AFTER_S`).
        make_dir: create the state directory when it is missing (never the directories above it);
            ``False``: refuse a missing one (`JournalWriter` once it has existed: one gone since
            was removed by its owner).

    Raises:
        JournalError: the directory or file cannot be created or opened; the state directory is
            missing and may not be created, or the directory above it is missing.
    """

    def __init__(self, path: str | Path, clock: Clock, retention: Retention | None = None,
                 block_frames: int = BLOCK_FRAMES, block_after_s: float = BLOCK_AFTER_S,
                 make_dir: bool = True) -> None:
        target = journal_path(path)
        conn: sqlite3.Connection | None = None
        try:
            _state_dir(target, make_dir)
            conn = sqlite3.connect(target, timeout=5.0, isolation_level=None)
            newer = _newer_format(conn)
            if newer is not None:
                conn.close()
                # Its layout is not this agent's to know: writing format 3 into it (and its format
                # row back to 3) would spoil it for the rigmon that wrote it. It is set aside, kept.
                raise JournalDamaged(f"journal {target} is of format {newer}, newer than this agent's "
                                     f"{FORMAT_VERSION} (written by a newer rigmon)")
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
            # A journal of format 2 gets the stream column; its rows keep their dictionaries.
            columns = {row[1] for row in conn.execute("PRAGMA table_info(frames)")}
            upgrade = UPGRADE_SQL if columns and "stream" not in columns else ""
            # One transaction: in autocommit each CREATE would commit on its own, and a reader
            # (an API request just after the start) could find some tables and not others.
            # With the format row in the same transaction, a journal that has it has them all.
            conn.executescript(f"BEGIN IMMEDIATE;\n{SCHEMA_SQL}\n{upgrade}\nINSERT OR REPLACE INTO meta(key, value) "
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
        #: The open block stream: its compressor, id (its first row's id), run, frames, first frame's time.
        self._stream: Any = None
        self._stream_id: int | None = None
        self._stream_run: str | None = None
        self._stream_frames = 0
        #: The tiers' open buckets, once maintenance has caught the stored tiers up (`downsample`).
        self._rollup: Rollup | None = None
        #: Frames committed since the rollup last took frames: ``(taken_at, frame, wire JSON)``.
        self._pending: list[tuple[float, Frame, bytes]] = []

    def close(self) -> None:
        """Close the connection (the last one checkpoints and removes the WAL file)."""
        self.conn.close()

    def begin_run(self, run_id: str, node: str, started_at: float, info_json: str | None = None,
                  config_json: str | None = None, events: Sequence[tuple[str, Event]] = ()) -> list[UncleanRun]:
        """Record the start of a run; return earlier runs that never stopped cleanly.

        Those runs are marked as ended at their last frame, so each is reported once. ``events``
        (``(run_id, event)``) are written in the same transaction: why a journal was begun afresh.
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
            for event_run, event in events:
                self._insert_event(event_run, event)
        return unclean

    def end_run(self, run_id: str, stopped_at: float, events: Sequence[tuple[str, Event]] = ()) -> None:
        """Record a clean stop of the run, and with it (one transaction) ``events`` (``(run_id, event)``):
        those no frame carried (emitted during the stop, or of frames that could not be written)."""
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            for event_run, event in events:
                self._insert_event(event_run, event)
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
        """Like `write` for frames already encoded as wire JSON.

        Each ``(frame, raw)`` must be a frame and its own wire JSON (`frame_json`): the journal
        stores ``raw``, and the tiers read the frame's records, whose series are the JSON's.

        Each frame's line goes into the open block stream and is sync-flushed, so the row holds
        whole compressed lines (see `blocks.stream_compressor`); the frame that fills a block
        finishes its gzip member, and the next frame (or another run's) opens a new stream.
        Committed frames wait for the tiers' open buckets until maintenance after their minute
        (`catch_up_tiers`) or `MAX_PENDING_FRAMES`: folded in one go, a frame costs a third of
        what it costs alone, a second after the last one, with cold caches.
        """
        conn = self.conn
        written: list[tuple[float, Frame, bytes]] = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            for frame, raw in frames:
                if self._stream is None or frame.run_id != self._stream_run:
                    self._stream = stream_compressor()
                    self._stream_id = None
                    self._stream_run = frame.run_id
                    self._stream_frames = 0
                self._stream_frames += 1
                comp = self._stream
                last = self._stream_frames >= self.block_frames
                body = comp.compress(raw) + comp.compress(b"\n") + comp.flush(
                    zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)
                if self._stream_id is None:
                    # A stream is named by its first row's id: its rows are the ones from there on.
                    row_id = conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM frames").fetchone()[0]
                    self._stream_id = int(row_id)
                    conn.execute(
                        "INSERT INTO frames(id, taken_at, run_id, seq, dict_id, body, stream) VALUES (?, ?, ?, ?, NULL, ?, ?)",
                        (row_id, frame.taken_at, frame.run_id, frame.seq, body, row_id))
                else:
                    conn.execute(
                        "INSERT INTO frames(taken_at, run_id, seq, dict_id, body, stream) VALUES (?, ?, ?, NULL, ?, ?)",
                        (frame.taken_at, frame.run_id, frame.seq, body, self._stream_id))
                if last:
                    self._stream = None
                for event in frame.events:
                    self._insert_event(frame.run_id, event)
                written.append((frame.taken_at, frame, raw))
            for run_id, event in events:
                self._insert_event(run_id, event)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            # The compressor took in frames that were rolled back: the stream's rows stop at the
            # last commit (a block is made of them as they are).
            self._stream = None
            raise
        if self._rollup is not None:
            self._pending += written
            if len(self._pending) >= MAX_PENDING_FRAMES:
                try:
                    self._fold_pending()
                except Exception:  # noqa: BLE001 - the frames are committed; maintenance catches the tiers up
                    pass

    def _fold_pending(self) -> None:
        """The committed frames into the tiers' open buckets; store the buckets they finish."""
        rollup = self._rollup
        pending, self._pending = self._pending, []
        if rollup is None:
            return
        finished: list[tuple[int, float, dict[str, Stats]]] = []
        try:
            for taken_at, frame, raw in pending:
                readings: Any = frame.readings
                if readings.__class__ is not Readings:
                    # Not a record (a frame built by hand): its JSON is what is stored.
                    readings = _readings_decoder.decode(raw).readings
                    if not isinstance(readings, dict):
                        readings = {}
                finished += rollup.add(taken_at, readings)
            if finished:
                with self.conn:
                    self.conn.execute("BEGIN IMMEDIATE")
                    self._store_buckets(finished, rollup)
        except BaseException:
            # Those buckets are not stored: the tiers catch up from the journal.
            self._rollup = None
            raise

    def _store_buckets(self, finished: Sequence[tuple[int, float, dict[str, Stats]]], rollup: Rollup | None) -> None:
        for step, start, stats in finished:
            self.conn.execute("INSERT OR REPLACE INTO buckets(step_s, start_at, body) VALUES (?, ?, ?)",
                              (step, start, encode_bucket(stats)))
        if rollup is not None and rollup.minute_start is not None:
            mark = rollup.minute_start
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?), (?, ?)",
                              (f"tier:{TIERS_S[0]}:until", repr(mark),
                               f"tier:{TIERS_S[1]}:until", repr(floor_to(mark, TIERS_S[1]))))

    def _insert_event(self, run_id: str, event: Event) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO events(id, at, run_id, kind, severity, body) VALUES (?, ?, ?, ?, ?, ?)",
            (event.id, event.at, run_id, event.kind, event.severity, encode(event).decode()))

    def maintain(self, go_on: Callable[[], bool] = go_on_always) -> None:
        """Catch the tiers up (until writes keep them), apply retention by age and by size, then write blocks.

        Args:
            go_on: asked before each step that writes: a pass it cuts short (the writer's stop) ends
                between two transactions, each whole, so the journal stays valid, and the next pass
                takes up what is left.
        """
        if go_on():
            self.catch_up_tiers(go_on)
        if go_on():
            self.retain(go_on)
        if go_on():
            self.compact(go_on=go_on)

    def catch_up_tiers(self, go_on: Callable[[], bool] = go_on_always) -> None:
        """Until the tiers are kept as frames are written: store what they lack from the journal.

        Once `downsample` finds nothing left to store, `write` keeps them (`Rollup`) and this
        does nothing more; after a failed write it catches up again. A `downsample` that ``go_on``
        cut short may have left tiers behind: the rollup waits for a pass that finds none.
        """
        rollup = self._rollup
        if rollup is not None:
            # Once a minute has ended: its frames in one go (a batch folds warm).
            if self._pending and (rollup.minute_start is None
                                  or floor_to(self._pending[-1][0], TIERS_S[0]) > rollup.minute_start):
                self._fold_pending()
        elif not self.downsample(go_on) and go_on():
            self._start_rollup()

    def _start_rollup(self) -> None:
        """Keep the tiers from here on as frames are written: open buckets seeded from the journal.

        Called when `downsample` has nothing left to store: the 60 s watermark is the newest
        frame's minute, whose frames so far are read back once; the stored minutes of its
        quarter hour seed the 900 s bucket.
        """
        step0, step1 = TIERS_S
        with self._snapshot():
            span = self.time_range()
            mark = self.watermark(step0)
            if span is None and mark is None:
                self._rollup = Rollup(None)
                self._pending = []
                return
            minute = floor_to(span[1], step0) if span is not None else None
            if minute is None or (mark is not None and minute < mark):
                assert mark is not None
                minute = mark
            partial = self.compute_buckets(0, minute, minute + step0)
            frames = self.count_frames(minute, math.nextafter(minute + step0, -math.inf))
            minute_stats = partial[0][1] if partial else {}
            quarter: dict[str, Stats] = {}
            quarter_start = floor_to(minute, step1)
            mark1 = self.watermark(step1)
            minutes = 0
            if mark1 is None or mark1 <= quarter_start:
                for _, stats in self.buckets(0, quarter_start, minute):
                    merge_stats(quarter, stats)
                    minutes += 1
            newest = next(iter(self._frames_in(span[1], span[1])), None) if span is not None else None
        self._rollup = Rollup(minute, (minute_stats, frames), (quarter, minutes))
        self._pending = []
        if newest is not None:
            # The next frames most likely have its shape: compile it at the start, not with them
            # (as the writer will hold them: records).
            try:
                self._rollup.prepare(decode(Frame, newest[1]).readings)
            except SchemaError:
                pass

    def downsample(self, go_on: Callable[[], bool] = go_on_always) -> bool:
        """Store the tiers' complete buckets past their watermarks (bounded work per call).

        Args:
            go_on: asked before each tier's transaction: none more once it says no.

        Returns:
            whether it stored anything (the tiers were behind the frames).
        """
        advanced = False
        for tier, step in enumerate(TIERS_S):
            if not go_on():
                break
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
            advanced = True
        return advanced
