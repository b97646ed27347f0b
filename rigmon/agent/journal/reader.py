"""Read access to a journal: frames, events, series by tier, runs, and the history answer."""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from rigmon.agent.journal.blocks import (
    DICT_CACHE_ENTRIES,
    FramesGzip,
    decompress,
    gunzip_member,
    gunzip_prefix,
    gzip_member,
    inflates_whole,
    unpack_times,
)
from rigmon.agent.journal.layout import JournalError, journal_path
from rigmon.agent.journal.read_only import ReadOnlyJournal, open_read_only
from rigmon.agent.journal.runs import FINAL_WINDOW_S, RunRecord
from rigmon.agent.journal.tiers import MAX_POINTS, TIERS_S, decode_bucket, floor_to
from rigmon.schema import (
    SCHEMA_VERSION,
    Event,
    Frame,
    History,
    HistorySeries,
    decode,
    encode,
)
from rigmon.series import Stats, add_value, frame_series, merge_stats


#: Lines `JournalReader.unreadable` keeps at most.
MAX_UNREADABLE_NOTED = 100


def encode_history(history: History) -> bytes:
    """``encode(history)``: kept as a name for its callers; the compiled codec needs no shortcut.

    An hour of a large rig is thousands of series of 60 points, which the old reflection
    encoder walked number by number; msgspec encodes them at ``json.dumps`` speed or better.
    """
    return encode(history)


class JournalReader:
    """Read access to a journal: frames, events, series by tier, runs.

    Args:
        path: the journal file (or its state directory).
        conn: an open connection to use instead of opening one read-only (the writer's).

    Raises:
        JournalError: no journal there, not one this user may read, or not one SQLite can read
            (see `rigmon.agent.journal.read_only.open_read_only`).
    """

    def __init__(self, path: str | Path, conn: sqlite3.Connection | None = None) -> None:
        self.path = journal_path(path)
        #: The read-only connection this reader opened (and closes), ``None`` when given ``conn``.
        self._opened: ReadOnlyJournal | None = None
        if conn is None:
            self._opened = open_read_only(self.path)
            conn = self._opened.conn
        self.conn = conn
        #: Frames left out of answers because their stored bytes do not decompress, one line per block or stream.
        self.unreadable: list[str] = []
        self._dicts: dict[int, bytes] = {}
        #: Whether ``frames`` has format 3's stream column (a format 2 journal read as it is has not).
        try:
            self._streams = any(row[1] == "stream" for row in conn.execute("PRAGMA table_info(frames)"))
        except sqlite3.Error as exc:
            self.close()
            raise JournalError(f"cannot read journal {self.path}: {exc}") from None

    def close(self) -> None:
        """Close the connection if this reader opened it."""
        if self._opened is not None:
            self._opened.close()
            self._opened = None

    def __enter__(self) -> JournalReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _zdict(self, dict_id: int | None) -> bytes | None:
        if dict_id is None:
            return None
        cached = self._dicts.get(dict_id)
        if cached is None:
            row = self.conn.execute("SELECT body FROM dicts WHERE id = ?", (dict_id,)).fetchone()
            if row is None:
                raise JournalError(f"compression dictionary {dict_id} is missing")
            cached = zlib.decompress(row[0])
            # Bounded: dictionaries rotate every DICT_ROTATE_S, so a long-running writer (its
            # downsampling reads ever newer frames) would otherwise keep every one it met.
            while len(self._dicts) >= DICT_CACHE_ENTRIES:
                del self._dicts[next(iter(self._dicts))]
            self._dicts[dict_id] = cached
        return cached

    def _frame_json(self, dict_id: int | None, body: bytes) -> bytes:
        return decompress(body, self._zdict(dict_id))

    @contextlib.contextmanager
    def _snapshot(self) -> Iterator[None]:
        """One read transaction: statements inside see the same state of the file (WAL)."""
        if self.conn.in_transaction:
            yield
            return
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            self.conn.execute("COMMIT")

    def expired_before(self) -> float | None:
        """Frames taken before this are past retention and not shown (``None``: none expired yet)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'frames:expired_before'").fetchone()
        return float(row[0]) if row else None

    def _sources(self, lo: float, hi: float, run_id: str | None = None,
                 block_bodies: bool = True) -> list[tuple[Any, ...]]:
        """Blocks and recent frames that may hold frames taken in ``[lo, hi]``, oldest first.

        Without ``block_bodies`` a block's body is ``None``: an export reads them one at a time.

        One statement, so a block written meanwhile (frames moved from one table to the
        other in one transaction) is seen either before or after the move, never both.
        Rows: ``(0, min_at, id, max_at, taken_at blob, gzip body)`` for a block,
        ``(1, taken_at, id, dict_id, None, zlib body)`` for a frame of format 2,
        ``(2, first taken_at, stream, None, taken_at tuple, gzip member so far)`` for a stream
        (all its rows: they decompress only together, from the first).
        """
        run = " AND run_id = :run" if run_id is not None else ""
        params = {"lo": lo, "hi": hi, "run": run_id}
        block_body = "body" if block_bodies else "NULL"
        if not self._streams:
            sql = (f"SELECT 0, min_at, id, max_at, taken_at, {block_body} FROM blocks "
                   f"WHERE max_at >= :lo AND min_at <= :hi{run} "
                   "UNION ALL SELECT 1, taken_at, id, dict_id, NULL, body FROM frames "
                   f"WHERE taken_at >= :lo AND taken_at <= :hi{run} ORDER BY 1, 2, 3")
            return self.conn.execute(sql, params).fetchall()
        sql = (f"SELECT 0, min_at, id, max_at, taken_at, {block_body}, NULL FROM blocks "
               f"WHERE max_at >= :lo AND min_at <= :hi{run} "
               "UNION ALL SELECT 1, taken_at, id, dict_id, NULL, body, stream FROM frames "
               f"WHERE stream IS NULL AND taken_at >= :lo AND taken_at <= :hi{run} "
               "UNION ALL SELECT 2, taken_at, id, NULL, NULL, body, stream FROM frames WHERE stream IN "
               f"(SELECT stream FROM frames WHERE stream IS NOT NULL AND taken_at >= :lo AND taken_at <= :hi{run}) "
               "ORDER BY 1, 7, 3")
        out: list[tuple[Any, ...]] = []
        streams: dict[int, tuple[list[float], list[bytes]]] = {}
        firsts: dict[int, tuple[float, int]] = {}
        for kind, at, row_id, extra, times, body, stream in self.conn.execute(sql, params):
            if kind != 2:
                out.append((kind, at, row_id, extra, times, body))
                continue
            parts = streams.get(stream)
            if parts is None:
                parts = streams[stream] = ([], [])
                firsts[stream] = (float(at), row_id)
            parts[0].append(float(at))
            parts[1].append(body)
        for stream, (stamps, bodies) in streams.items():
            out.append((2, firsts[stream][0], stream, None, tuple(stamps), b"".join(bodies)))
        out.sort(key=lambda r: (r[0] != 0, r[1], r[2]))
        return out

    @staticmethod
    def _stream_lines(body: bytes) -> list[bytes]:
        """A stream's frames (JSON lines of a possibly unfinished gzip member)."""
        try:
            raw, _ = gunzip_prefix(body)
        except zlib.error as exc:
            raise JournalError(f"a frame stream does not decompress: {exc}") from None
        return raw.split(b"\n")

    def _visible_from(self, from_at: float) -> float:
        since = self.expired_before()
        return from_at if since is None else max(from_at, since)

    def _frames_in(self, from_at: float, to_at: float, *, open_end: bool = False, run_id: str | None = None,
                   limit: int | None = None) -> Iterator[tuple[float, bytes]]:
        """``(taken_at, wire JSON)`` of frames in ``[from_at, to_at]`` (``to_at`` excluded with
        ``open_end``), from blocks and recent frames alike, oldest first."""
        lo = self._visible_from(from_at)

        def inside(t: float) -> bool:
            return lo <= t and (t < to_at if open_end else t <= to_at)

        n = 0
        for kind, at, _, extra, times, body in self._sources(lo, to_at, run_id):
            stamps = self._times(kind, at, times)
            if stamps is None or not any(inside(t) for t in stamps):
                continue
            items = self._items(kind, stamps, extra, body)
            for t, raw in items:
                if inside(t):
                    if limit is not None and n >= limit:
                        return
                    n += 1
                    yield t, raw

    def _times(self, kind: int, at: float, times: Any) -> tuple[float, ...] | None:
        """A source's frame times (see `_sources`); ``None`` when they cannot be read (noted)."""
        if kind == 2:
            return tuple(times)
        if kind == 1:
            return (float(at),)
        try:
            return unpack_times(times)
        except (zlib.error, struct.error) as exc:
            self._unreadable(kind, (float(at),), f"its frame times do not decompress ({exc})")
            return None

    def _items(self, kind: int, stamps: tuple[float, ...], extra: Any, body: bytes) -> list[tuple[float, bytes]]:
        """A source's ``(taken_at, wire JSON)``; none when its body does not decompress (noted in `unreadable`).

        Its bytes can go bad on the disk while SQLite's pages stay sound (``quick_check`` does not
        read a blob's bytes): one such block or stream used to fail every window that held it.
        """
        try:
            if kind == 0:
                lines = gunzip_member(body).split(b"\n")
            elif kind == 2:
                lines = self._stream_lines(body)
            else:
                return [(stamps[0], self._frame_json(extra, body))]
        except (JournalError, zlib.error) as exc:
            self._unreadable(kind, stamps, str(exc))
            return []
        # One line per frame, each ended by a newline: anything else is garbage that decompressed.
        if len(lines) != len(stamps) + 1 or lines[-1]:
            self._unreadable(kind, stamps, f"{len(lines) - 1} lines for {len(stamps)} frames")
            return []
        return list(zip(stamps, lines))

    def _unreadable(self, kind: int, stamps: tuple[float, ...], why: str) -> None:
        if len(self.unreadable) >= MAX_UNREADABLE_NOTED:
            return  # the writer's own reader meets a spoilt stream at every pass until retention
        what = "a block" if kind == 0 else "a frame stream" if kind == 2 else "a frame"
        first = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(stamps[0])) if stamps else "?"
        self.unreadable.append(f"{what} of {len(stamps)} frames from {first} UTC cannot be read: {why}")

    def frames_json(self, from_at: float, to_at: float, limit: int | None = None) -> list[bytes]:
        """Frames with ``from_at <= taken_at <= to_at`` as wire JSON bytes, oldest first."""
        return [raw for _, raw in self._frames_in(from_at, to_at, limit=limit)]

    def frames(self, from_at: float, to_at: float, limit: int | None = None) -> list[Frame]:
        """Like `frames_json`, decoded into `Frame` records."""
        return [decode(Frame, raw) for raw in self.frames_json(from_at, to_at, limit)]

    def frames_gzip(self, from_at: float, to_at: float, limit: int | None = None,
                    out: IO[bytes] | None = None) -> FramesGzip:
        """Frames with ``from_at <= taken_at <= to_at`` as gzip members of JSON lines, oldest first.

        Blocks wholly inside the window are sent as stored, without decompressing them;
        parts of blocks and recent frames become new members. Concatenated, the members are
        one gzip stream (RFC 1952), so a client can store or forward the answer as it is.

        With ``out`` the members are written there as they are made and ``body`` is empty
        (an hour of a large rig is some 20 MB of them: not held in memory by the agent).
        """
        lo = self._visible_from(from_at)
        held: list[bytes] = []
        write: Callable[[bytes], object] = held.append if out is None else out.write
        pending: list[bytes] = []
        count = 0
        last_at: float | None = None
        more = False

        def flush() -> None:
            if pending:
                write(gzip_member(b"".join(pending)))
                pending.clear()

        # One read transaction: the blocks' bodies are read one at a time, from the state listed.
        with self._snapshot():
            for kind, at, row_id, extra, times, body in self._sources(lo, to_at, block_bodies=False):
                stamps = self._times(kind, at, times)
                if stamps is None:
                    continue
                if kind == 0:
                    wanted = [t for t in stamps if lo <= t <= to_at]
                    if not wanted:
                        continue
                    # Listed without its body, read in the same transaction (see `_sources`).
                    body = self.conn.execute("SELECT body FROM blocks WHERE id = ?", (row_id,)).fetchone()[0]
                    if len(wanted) == len(stamps) and (limit is None or count + len(stamps) <= limit):
                        # Sent as stored, but never unchecked: a block whose bytes went bad on the disk
                        # (SQLite's pages are fine) would make the whole answer unreadable from it on.
                        if inflates_whole(body, len(stamps)):
                            flush()
                            write(body)
                            count += len(stamps)
                            last_at = stamps[-1]
                        else:
                            self._unreadable(kind, stamps, "it does not decompress")
                        continue
                    if limit is not None and count >= limit:
                        more = True
                        break
                elif kind == 2:
                    if limit is not None and count >= limit and any(lo <= t <= to_at for t in stamps):
                        more = True
                        break
                items = self._items(kind, stamps, extra, body)
                for t, raw in items:
                    if lo <= t <= to_at:
                        if limit is not None and count >= limit:
                            more = True
                            break
                        pending.append(raw + b"\n")
                        count += 1
                        last_at = t
                if more:
                    break
        flush()
        return FramesGzip(b"".join(held), count, last_at, more)

    def count_frames(self, from_at: float, to_at: float) -> int:
        """How many frames the window holds."""
        lo = self._visible_from(from_at)
        n = 0
        for kind, at, _, _, times, _ in self._sources(lo, to_at):
            stamps = unpack_times(times) if kind == 0 else times if kind == 2 else (float(at),)
            n += sum(1 for t in stamps if lo <= t <= to_at)
        return n

    def events(self, from_at: float, to_at: float) -> list[Event]:
        """Events with ``from_at <= at <= to_at``, oldest first."""
        rows = self.conn.execute("SELECT body FROM events WHERE at >= ? AND at <= ? ORDER BY at, rowid",
                                 (from_at, to_at))
        return [decode(Event, body) for (body,) in rows]

    def runs(self) -> list[RunRecord]:
        """Every run recorded, oldest first."""
        rows = self.conn.execute(
            "SELECT run_id, node, started_at, stopped_at, clean, info, config FROM runs ORDER BY started_at, rowid")
        return [RunRecord(r[0], r[1], r[2], r[3], None if r[4] is None else bool(r[4]), r[5], r[6]) for r in rows]

    def time_range(self) -> tuple[float, float] | None:
        """``taken_at`` of the first and last frame held, ``None`` when there is none."""
        with self._snapshot():
            lo = self._visible_from(-math.inf)
            firsts: list[float] = []
            lasts: list[float] = []
            row = self.conn.execute("SELECT MIN(taken_at), MAX(taken_at) FROM frames WHERE taken_at >= ?",
                                    (lo,)).fetchone()
            if row[0] is not None:
                firsts.append(float(row[0]))
                lasts.append(float(row[1]))
            row = self.conn.execute("SELECT MIN(min_at), MAX(max_at) FROM blocks WHERE max_at >= ?", (lo,)).fetchone()
            if row[0] is not None:
                lasts.append(float(row[1]))
                if row[0] >= lo:
                    firsts.append(float(row[0]))
                else:
                    # Retention ends inside a block: its first visible frame, from its times.
                    for (blob,) in self.conn.execute("SELECT taken_at FROM blocks WHERE max_at >= ? AND min_at < ?",
                                                     (lo, lo)):
                        firsts.extend(t for t in unpack_times(blob) if t >= lo)
                    later = self.conn.execute("SELECT MIN(min_at) FROM blocks WHERE min_at >= ?", (lo,)).fetchone()
                    if later[0] is not None:
                        firsts.append(float(later[0]))
        return (min(firsts), max(lasts)) if firsts and lasts else None

    def watermark(self, step: int) -> float | None:
        """End of the last bucket of width ``step`` the writer has stored."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (f"tier:{step}:until",)).fetchone()
        return float(row[0]) if row else None

    def _frame_stats(self, from_at: float, to_at: float) -> Iterator[tuple[float, dict[str, float]]]:
        for taken_at, raw in self._frames_in(from_at, to_at, open_end=True):
            yield taken_at, frame_series(json.loads(raw))

    def buckets(self, tier: int, from_at: float, to_at: float) -> list[tuple[float, dict[str, Stats]]]:
        """Buckets of ``TIERS_S[tier]`` overlapping ``[from_at, to_at)``, oldest first.

        Stored buckets are read; past the tier's watermark (the bucket in progress, or
        after a crash) they are computed from the finer source on the fly.
        """
        stored, computed = self._bucket_parts(tier, from_at, to_at)
        return [(float(at), decode_bucket(body)) for at, body in stored] + computed

    def _bucket_parts(self, tier: int, from_at: float, to_at: float
                      ) -> tuple[list[tuple[float, bytes]], list[tuple[float, dict[str, Stats]]]]:
        """Stored buckets (encoded) before the watermark, and those computed past it."""
        step = TIERS_S[tier]
        lo = floor_to(from_at, step)
        mark = self.watermark(step)
        stored: list[tuple[float, bytes]] = []
        if mark is not None:
            stored = self.conn.execute(
                "SELECT start_at, body FROM buckets WHERE step_s = ? AND start_at >= ? AND start_at < ? "
                "AND start_at < ? ORDER BY start_at", (step, lo, to_at, mark)).fetchall()
        tail_from = lo if mark is None else max(lo, mark)
        computed = self.compute_buckets(tier, tail_from, to_at) if tail_from < to_at else []
        return stored, computed

    def compute_buckets(self, tier: int, from_at: float, to_at: float) -> list[tuple[float, dict[str, Stats]]]:
        """Buckets of ``TIERS_S[tier]`` in ``[from_at, to_at)`` computed from the finer source."""
        step = TIERS_S[tier]
        grouped: dict[float, dict[str, Stats]] = {}
        if tier == 0:
            for at, values in self._frame_stats(from_at, to_at):
                stats = grouped.setdefault(floor_to(at, step), {})
                for name, value in values.items():
                    add_value(stats, name, value)
        else:
            for at, finer in self.buckets(tier - 1, from_at, to_at):
                merge_stats(grouped.setdefault(floor_to(at, step), {}), finer)
        return sorted(grouped.items())

    def final_readings(self, run_id: str) -> tuple[float | None, dict[str, tuple[float, float]]]:
        """Last frame time of a run and each series' min/max over its final seconds."""
        with self._snapshot():
            row = self.conn.execute(
                "SELECT MAX(m) FROM (SELECT MAX(taken_at) AS m FROM frames WHERE run_id = :run "
                "UNION ALL SELECT MAX(max_at) FROM blocks WHERE run_id = :run)", {"run": run_id}).fetchone()
            if row is None or row[0] is None:
                return None, {}
            last = float(row[0])
            stats: dict[str, Stats] = {}
            for _, raw in self._frames_in(last - FINAL_WINDOW_S, last, run_id=run_id):
                for name, value in frame_series(json.loads(raw)).items():
                    add_value(stats, name, value)
        return last, {name: (s[0], s[2]) for name, s in stats.items()}

    def history(self, node: str, from_at: float, to_at: float, interval_s: float,
                names: set[str] | None = None, with_frames: bool = False, frame_limit: int | None = None) -> History:
        """Series (and events, optionally frames) of a window from the tier that fits its span.

        Whole frames are used while the span holds at most `MAX_POINTS` frame intervals,
        else the finest tier with at most that many buckets, else the coarsest.

        Args:
            node: node name put in the answer.
            from_at: window start, Unix seconds.
            to_at: window end, Unix seconds.
            interval_s: the agent's frame interval (decides when frames are too many).
            names: only these series (all when ``None``).
            with_frames: add the frames themselves (see `frames_json` for a raw variant).
            frame_limit: at most this many frames.
        """
        span = max(0.0, to_at - from_at)
        tier = "frames"
        step_s = interval_s
        columns: dict[str, tuple[list[float], list[float], list[float], list[float]]] = {}
        if names is not None and not names:
            pass
        elif span / interval_s <= MAX_POINTS:
            for at, values in self._frame_stats(from_at, math.nextafter(to_at, math.inf)):
                for name, v in values.items():
                    if names is None or name in names:
                        col = columns.setdefault(name, ([], [], [], []))
                        col[0].append(at)
                        col[1].append(v)
                        col[2].append(v)
                        col[3].append(v)
        else:
            index = next((i for i, s in enumerate(TIERS_S) if span / s <= MAX_POINTS), len(TIERS_S) - 1)
            step_s = float(TIERS_S[index])
            tier = f"{TIERS_S[index]}s"
            # Columns directly, stored buckets as stored: an hour of a large rig is some 50 000 points.
            stored, computed = self._bucket_parts(index, from_at, to_at)
            rows: list[tuple[float, dict[str, list[float]]]] = [
                (float(at), json.loads(zlib.decompress(body))) for at, body in stored]
            rows += [(at, {name: [st[0], st[1] / st[3] if st[3] else st[0], st[2]] for name, st in stats.items()})
                     for at, stats in computed]
            for at, bucket in rows:
                for name, row in bucket.items():
                    if names is None or name in names:
                        col = columns.setdefault(name, ([], [], [], []))
                        col[0].append(at)
                        col[1].append(row[0])
                        col[2].append(row[1])
                        col[3].append(row[2])
        series = {name: HistorySeries(at=tuple(c[0]), min=tuple(c[1]), mean=tuple(c[2]), max=tuple(c[3]))
                  for name, c in sorted(columns.items())}
        frames = tuple(self.frames(from_at, to_at, frame_limit)) if with_frames else ()
        return History(schema=SCHEMA_VERSION, node=node, from_at=from_at, to_at=to_at, tier=tier, step_s=step_s,
                       series=series, events=tuple(self.events(from_at, to_at)), frames=frames)

