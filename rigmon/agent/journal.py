"""Journal: the agent's flight recorder, frames and events in SQLite (WAL) with min/mean/max tiers.

Layout of ``<state_dir>/journal.sqlite3``:

- ``frames``: each recent frame as its wire JSON, zlib-compressed against a preset dictionary
  (a recent frame, rotated every ten minutes, in ``dicts``), indexed by ``taken_at``. This is
  what every commit appends to, so a crash loses at most the last commit interval.
- ``blocks``: older frames, recompressed by maintenance in blocks of up to `BLOCK_FRAMES`
  frames of one run: one gzip member of JSON lines each (zlib's window sees the frame before,
  which a per-frame dictionary cannot), with the frames' ``taken_at`` alongside. Moving frames
  from ``frames`` to ``blocks`` is one transaction, and readers query both in one statement, so
  they see every frame exactly once. An export sends whole blocks as they are (gzip members
  concatenate into one gzip stream).
- ``events``: every event of every frame, as wire JSON.
- ``buckets``: per-series ``[min, mean, max, count]`` over 60 s and 900 s buckets; the
  60 s tier is computed from frames, the 900 s tier from the 60 s one, so nothing averages a
  sag away. Series are found generically (`rigmon.series`).
- ``runs``: one row per agent run; ``stopped_at`` is written at a clean stop, so a run
  without it was killed or lost power.
- ``meta``: format version, the tiers' watermarks and ``frames:expired_before`` (frames before
  it are past retention: hidden from readers at once, deleted with the last block holding them).

One `JournalStore` (one connection) belongs to the writer thread; readers open their own
read-only connection through `JournalReader`, which WAL lets run beside the writer.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import queue
import sqlite3
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rigmon.agent.frame_json import frame_json
from rigmon.clock import Clock
from rigmon.config import JournalSection
from rigmon.schema import (
    SCHEMA_VERSION,
    CollectorStatus,
    Event,
    Frame,
    History,
    HistorySeries,
    Severity,
    decode_data,
    encode,
)
from rigmon.series import Stats, add_value, frame_series, merge_stats
from rigmon.typed import to_data

log = logging.getLogger(__name__)

JOURNAL_FILE = "journal.sqlite3"
FORMAT_VERSION = 2
#: Bucket widths of the downsampled tiers, finest first; each is computed from the one before.
TIERS_S = (60, 900)
#: A new compression dictionary (the current frame) after this many seconds of frames.
DICT_ROTATE_S = 600.0
#: Decompressed dictionaries a reader keeps (32 KiB each).
DICT_CACHE_ENTRIES = 16
#: zlib uses at most the last 32 KiB of a preset dictionary.
ZDICT_MAX_BYTES = 32 * 1024
#: Seconds before the last frame of a crashed run that its summary covers.
FINAL_WINDOW_S = 5.0
#: A history answer aims at no more points per series than this; the tier is chosen for it.
MAX_POINTS = 1500
#: Buckets one maintenance pass computes per tier (keeps the writer responsive after a gap).
MAX_BUCKETS_PER_PASS = 240
#: Real seconds between maintenance passes (downsampling, retention) of the writer thread.
MAINTAIN_EVERY_S = 15.0
#: Frames at least this old (writer's clock) are recompressed into blocks.
BLOCK_AFTER_S = 60.0
#: Frames per block: 5 minutes at 1 Hz, about 8 MB of JSON for a large rig.
BLOCK_FRAMES = 300
#: A block of fewer frames is written anyway once its first frame is this much older than
#: `BLOCK_AFTER_S` (slow frame intervals), or when a later run has begun.
BLOCK_FLUSH_S = 3600.0
#: Blocks one maintenance pass writes (each is its own short transaction).
MAX_BLOCKS_PER_PASS = 24
#: Deflate level of blocks: 9 costs about 50 ms per block of a large rig for ~10% fewer bytes than 6.
BLOCK_LEVEL = 9
#: Deflate level of gzip members made on the fly (parts of blocks, recent frames) for an export:
#: speed first, they are a few hundred frames at most.
EXPORT_LEVEL = 1

_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs(
    run_id TEXT PRIMARY KEY, node TEXT NOT NULL, started_at REAL NOT NULL,
    stopped_at REAL, clean INTEGER, info TEXT, config TEXT);
CREATE TABLE IF NOT EXISTS dicts(id INTEGER PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS frames(
    id INTEGER PRIMARY KEY, taken_at REAL NOT NULL, run_id TEXT NOT NULL, seq INTEGER NOT NULL,
    dict_id INTEGER, body BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS frames_taken_at ON frames(taken_at);
CREATE TABLE IF NOT EXISTS blocks(
    id INTEGER PRIMARY KEY, min_at REAL NOT NULL, max_at REAL NOT NULL, run_id TEXT NOT NULL,
    frames INTEGER NOT NULL, first_seq INTEGER NOT NULL, last_seq INTEGER NOT NULL,
    taken_at BLOB NOT NULL, body BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS blocks_max_at ON blocks(max_at);
CREATE TABLE IF NOT EXISTS events(
    id TEXT PRIMARY KEY, at REAL NOT NULL, run_id TEXT NOT NULL, kind TEXT NOT NULL,
    severity TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_at ON events(at);
CREATE TABLE IF NOT EXISTS buckets(
    step_s INTEGER NOT NULL, start_at REAL NOT NULL, body BLOB NOT NULL,
    PRIMARY KEY(step_s, start_at)) WITHOUT ROWID;
"""


class JournalError(Exception):
    """The journal cannot be opened or read; the message says why."""


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


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One agent run as the journal knows it.

    ``info`` and ``config`` are the JSON texts of /v1/info and the redacted configuration
    at the run's start; ``clean`` is ``None`` while the run is (or was last seen) running.
    """

    run_id: str
    node: str
    started_at: float
    stopped_at: float | None
    clean: bool | None
    info: str | None
    config: str | None


@dataclass(frozen=True, slots=True)
class UncleanRun:
    """A previous run that never recorded a clean stop, and its last readings.

    Attributes:
        run_id: the crashed run.
        node: its node name.
        started_at: when it started (Unix seconds).
        last_frame_at: its last frame's ``taken_at``, ``None`` when it wrote none.
        final: per series, the minimum and maximum over the last `FINAL_WINDOW_S` seconds.
    """

    run_id: str
    node: str
    started_at: float
    last_frame_at: float | None
    final: dict[str, tuple[float, float]]


def journal_path(state_dir: str | Path) -> Path:
    """The journal file in a state directory (or the file itself when given one)."""
    path = Path(state_dir)
    return path if path.suffix == ".sqlite3" else path / JOURNAL_FILE


# --- encoding ---------------------------------------------------------------------------


def _compress(raw: bytes, zdict: bytes | None) -> bytes:
    comp = zlib.compressobj(6, zdict=zdict) if zdict else zlib.compressobj(6)
    return comp.compress(raw) + comp.flush()


def _decompress(body: bytes, zdict: bytes | None) -> bytes:
    dec = zlib.decompressobj(zdict=zdict) if zdict else zlib.decompressobj()
    return dec.decompress(body) + dec.flush()


def gzip_member(raw: bytes, level: int = EXPORT_LEVEL) -> bytes:
    """``raw`` as one gzip member (no name, no time stamp: the same input gives the same bytes)."""
    comp = zlib.compressobj(level, zlib.DEFLATED, 31, 9)
    return comp.compress(raw) + comp.flush()


def _gunzip_member(body: bytes) -> bytes:
    dec = zlib.decompressobj(31)
    out = dec.decompress(body)
    if not dec.eof:
        raise JournalError("a frame block is truncated")
    return out


def _pack_times(times: Sequence[float]) -> bytes:
    return zlib.compress(struct.pack(f"<{len(times)}d", *times), 6)


def _unpack_times(blob: bytes) -> tuple[float, ...]:
    raw = zlib.decompress(blob)
    return struct.unpack(f"<{len(raw) // 8}d", raw)


@dataclass(frozen=True, slots=True)
class FramesGzip:
    """Frames of a window as concatenated gzip members of JSON lines (see `JournalReader.frames_gzip`).

    Attributes:
        body: gzip data; decompressed, one wire frame per line, oldest first.
        count: frames in it.
        last_at: ``taken_at`` of its last frame, ``None`` when empty.
        more: the limit cut the window short: ask again after ``last_at``.
    """

    body: bytes
    count: int
    last_at: float | None
    more: bool


def encode_history(history: History) -> bytes:
    """``encode(history)``, byte for byte, without walking every number through `to_data`.

    An hour of a large rig is thousands of series of 60 points; the generic encoder costs
    a noticeable fraction of a second per answer for them, ``json.dumps`` a few milliseconds.
    """
    head = encode(replace(history, series={}))
    # Field order puts series before events; strings never hold an unescaped quote.
    marker = b'"series":{}'
    cut = head.index(marker)
    series = json.dumps({name: {"at": s.at, "min": s.min, "mean": s.mean, "max": s.max}
                         for name, s in history.series.items()}, separators=(",", ":"), allow_nan=False).encode()
    return head[:cut] + b'"series":' + series + head[cut + len(marker):]


def _encode_bucket(stats: dict[str, Stats]) -> bytes:
    rows = {name: [s[0], float(f"{s[1] / s[3]:.7g}"), s[2], int(s[3])] for name, s in sorted(stats.items())}
    return zlib.compress(json.dumps(rows, separators=(",", ":")).encode(), 6)


def _decode_bucket(body: bytes) -> dict[str, Stats]:
    rows: dict[str, list[float]] = json.loads(zlib.decompress(body))
    return {name: [lo, mean * count, hi, float(count)] for name, (lo, mean, hi, count) in rows.items()}


def _floor(t: float, step: int) -> float:
    return float(math.floor(t / step) * step)


# --- reading ----------------------------------------------------------------------------


class JournalReader:
    """Read access to a journal: frames, events, series by tier, runs.

    Args:
        path: the journal file (or its state directory).
        conn: an open connection to use instead of opening one read-only (the writer's).

    Raises:
        JournalError: no journal there, or not a journal SQLite can read.
    """

    def __init__(self, path: str | Path, conn: sqlite3.Connection | None = None) -> None:
        self.path = journal_path(path)
        if conn is None:
            if not self.path.is_file():
                raise JournalError(f"no journal at {self.path}")
            try:
                conn = sqlite3.connect(f"file:{quote(str(self.path))}?mode=ro", uri=True, timeout=5.0)
                conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            except sqlite3.Error as exc:
                raise JournalError(f"cannot read journal {self.path}: {exc}") from None
            self._own = True
        else:
            self._own = False
        self.conn = conn
        self._dicts: dict[int, bytes] = {}

    def close(self) -> None:
        """Close the connection if this reader opened it."""
        if self._own:
            self.conn.close()

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
        return _decompress(body, self._zdict(dict_id))

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

    def _sources(self, lo: float, hi: float, run_id: str | None = None) -> list[tuple[Any, ...]]:
        """Blocks and recent frames that may hold frames taken in ``[lo, hi]``, oldest first.

        One statement, so a block written meanwhile (frames moved from one table to the
        other in one transaction) is seen either before or after the move, never both.
        Rows: ``(0, min_at, id, max_at, taken_at blob, gzip body)`` for a block,
        ``(1, taken_at, id, dict_id, None, zlib body)`` for a frame.
        """
        run = " AND run_id = :run" if run_id is not None else ""
        sql = ("SELECT 0, min_at, id, max_at, taken_at, body FROM blocks "
               f"WHERE max_at >= :lo AND min_at <= :hi{run} "
               "UNION ALL SELECT 1, taken_at, id, dict_id, NULL, body FROM frames "
               f"WHERE taken_at >= :lo AND taken_at <= :hi{run} ORDER BY 1, 2, 3")
        return self.conn.execute(sql, {"lo": lo, "hi": hi, "run": run_id}).fetchall()

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
            if kind == 0:
                stamps = _unpack_times(times)
                if not any(inside(t) for t in stamps):
                    continue
                items: Iterable[tuple[float, bytes]] = zip(stamps, _gunzip_member(body).split(b"\n"))
            else:
                items = ((float(at), self._frame_json(extra, body)),)
            for t, raw in items:
                if inside(t):
                    if limit is not None and n >= limit:
                        return
                    n += 1
                    yield t, raw

    def frames_json(self, from_at: float, to_at: float, limit: int | None = None) -> list[bytes]:
        """Frames with ``from_at <= taken_at <= to_at`` as wire JSON bytes, oldest first."""
        return [raw for _, raw in self._frames_in(from_at, to_at, limit=limit)]

    def frames(self, from_at: float, to_at: float, limit: int | None = None) -> list[Frame]:
        """Like `frames_json`, decoded into `Frame` records."""
        return [decode_data(Frame, json.loads(raw)) for raw in self.frames_json(from_at, to_at, limit)]

    def frames_gzip(self, from_at: float, to_at: float, limit: int | None = None) -> FramesGzip:
        """Frames with ``from_at <= taken_at <= to_at`` as gzip members of JSON lines, oldest first.

        Blocks wholly inside the window are sent as stored, without decompressing them;
        parts of blocks and recent frames become new members. Concatenated, the members are
        one gzip stream (RFC 1952), so a client can store or forward the answer as it is.
        """
        lo = self._visible_from(from_at)
        out: list[bytes] = []
        pending: list[bytes] = []
        count = 0
        last_at: float | None = None
        more = False

        def flush() -> None:
            if pending:
                out.append(gzip_member(b"".join(pending)))
                pending.clear()

        for kind, at, _, extra, times, body in self._sources(lo, to_at):
            if kind == 0:
                stamps = _unpack_times(times)
                wanted = [t for t in stamps if lo <= t <= to_at]
                if not wanted:
                    continue
                if len(wanted) == len(stamps) and (limit is None or count + len(stamps) <= limit):
                    flush()
                    out.append(body)
                    count += len(stamps)
                    last_at = stamps[-1]
                    continue
                if limit is not None and count >= limit:
                    more = True
                    break
                items: Iterable[tuple[float, bytes]] = zip(stamps, _gunzip_member(body).split(b"\n"))
            else:
                items = ((float(at), self._frame_json(extra, body)),)
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
        return FramesGzip(b"".join(out), count, last_at, more)

    def count_frames(self, from_at: float, to_at: float) -> int:
        """How many frames the window holds."""
        lo = self._visible_from(from_at)
        n = 0
        for kind, at, _, _, times, _ in self._sources(lo, to_at):
            stamps = _unpack_times(times) if kind == 0 else (float(at),)
            n += sum(1 for t in stamps if lo <= t <= to_at)
        return n

    def events(self, from_at: float, to_at: float) -> list[Event]:
        """Events with ``from_at <= at <= to_at``, oldest first."""
        rows = self.conn.execute("SELECT body FROM events WHERE at >= ? AND at <= ? ORDER BY at, rowid",
                                 (from_at, to_at))
        return [decode_data(Event, json.loads(body)) for (body,) in rows]

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
                        firsts.extend(t for t in _unpack_times(blob) if t >= lo)
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
        return [(float(at), _decode_bucket(body)) for at, body in stored] + computed

    def _bucket_parts(self, tier: int, from_at: float, to_at: float
                      ) -> tuple[list[tuple[float, bytes]], list[tuple[float, dict[str, Stats]]]]:
        """Stored buckets (encoded) before the watermark, and those computed past it."""
        step = TIERS_S[tier]
        lo = _floor(from_at, step)
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
                stats = grouped.setdefault(_floor(at, step), {})
                for name, value in values.items():
                    add_value(stats, name, value)
        else:
            for at, finer in self.buckets(tier - 1, from_at, to_at):
                merge_stats(grouped.setdefault(_floor(at, step), {}), finer)
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


# --- writing ----------------------------------------------------------------------------


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
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(target, timeout=5.0, isolation_level=None)
            # Incremental auto-vacuum must be chosen before the first table exists; it lets
            # retention give pages back to the file system.
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            # Frames compress to about 1 kB and buckets to a few: 16 KiB pages waste less of
            # each page than the default 4 KiB (only effective before the first table exists).
            conn.execute("PRAGMA page_size = 16384")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise JournalError(f"{target}: cannot use WAL mode (got {mode})")
            # FULL: a commit reaches the disk before it returns, so a power cut loses only
            # what was not yet committed (at most one commit interval).
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA journal_size_limit = 16777216")
            conn.executescript(_SCHEMA_SQL)
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('format', ?)", (str(FORMAT_VERSION),))
        except (sqlite3.Error, OSError) as exc:
            raise JournalError(f"cannot open journal {target}: {exc}") from None
        super().__init__(target, conn)
        self.clock = clock
        self.retention = retention or Retention()
        self.block_frames = block_frames
        self.block_after_s = block_after_s
        self._dict_id: int | None = None
        self._dict_bytes: bytes | None = None
        self._dict_at = 0.0

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

    def write(self, frames: Sequence[Frame]) -> None:
        """Write frames and their events in one transaction.

        Raises:
            sqlite3.Error: the write failed (disk full, I/O error); nothing of it is kept.
        """
        encoded = [(f, frame_json(f)) for f in frames]
        self.write_encoded(encoded)

    def write_encoded(self, frames: Iterable[tuple[Frame, bytes]]) -> None:
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
                conn.execute("INSERT INTO frames(taken_at, run_id, seq, dict_id, body) VALUES (?, ?, ?, ?, ?)",
                             (frame.taken_at, frame.run_id, frame.seq, self._dict_id,
                              _compress(raw, self._dict_bytes)))
                for event in frame.events:
                    conn.execute(
                        "INSERT OR REPLACE INTO events(id, at, run_id, kind, severity, body) VALUES (?, ?, ?, ?, ?, ?)",
                        (event.id, event.at, frame.run_id, event.kind, event.severity,
                         json.dumps(to_data(event), separators=(",", ":"))))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            # The dictionary row may have been rolled back with the frames.
            self._dict_id = self._dict_bytes = None
            raise

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
                (min(times), max(times), chunk[0][2], len(chunk), chunk[0][3], chunk[-1][3], _pack_times(times), body))
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
            start = _floor(source_start, step) if mark is None else mark
            end = min(_floor(source_end, step), start + step * MAX_BUCKETS_PER_PASS)
            if end <= start:
                continue
            buckets = self.compute_buckets(tier, start, end)
            with self.conn:
                self.conn.execute("BEGIN IMMEDIATE")
                for at, stats in buckets:
                    self.conn.execute("INSERT OR REPLACE INTO buckets(step_s, start_at, body) VALUES (?, ?, ?)",
                                      (step, at, _encode_bucket(stats)))
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


# --- the writer thread ------------------------------------------------------------------

#: Called from the writer thread: kind, severity, subject, message, data.
EventSink = Callable[[str, Severity, str, str, dict[str, str | int | float | bool | None]], None]

_STOP = object()


def unclean_message(run: UncleanRun, started_at: float) -> tuple[str, dict[str, str | int | float | bool | None]]:
    """Message and data of the ``unclean_shutdown`` event for a crashed run."""
    data: dict[str, str | int | float | bool | None] = {
        "previous_run_id": run.run_id, "previous_started_at": run.started_at, "last_frame_at": run.last_frame_at,
    }
    if run.last_frame_at is None:
        return "node restarted unexpectedly; the previous run recorded no frame", data
    gap_s = started_at - run.last_frame_at
    data["gap_s"] = round(gap_s, 3)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(run.last_frame_at))
    parts = [f"node restarted unexpectedly; last frame {stamp} UTC, {_fmt_duration(gap_s)} before this start"]
    volts = sorted((lo, name) for name, (lo, _) in run.final.items() if name.endswith("_volts"))
    watts = sorted(((hi, name) for name, (_, hi) in run.final.items()
                    if name.endswith("_w") and "limit" not in name), reverse=True)
    details = [f"{name} min {lo:.3g} V" for lo, name in volts[:2]]
    details += [f"{name} max {hi:.4g} W" for hi, name in watts[:3]]
    if details:
        parts.append(f"final {FINAL_WINDOW_S:g} s: " + ", ".join(details))
    ranked = sorted(run.final.items(), key=lambda kv: (not kv[0].endswith(("_volts", "_w", "_c", "_amps")), kv[0]))
    for name, (lo, hi) in ranked[:40]:
        data[f"min:{name}"] = lo
        data[f"max:{name}"] = hi
    return "; ".join(parts), data


def _fmt_duration(seconds: float) -> str:
    if abs(seconds) < 120:
        return f"{seconds:.1f} s"
    if abs(seconds) < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


class JournalWriter:
    """Writes frames to the journal from a thread of its own, so sampling never waits on disk.

    Frames go through a bounded queue; the thread commits what it has at least every
    ``commit_interval_s`` and runs maintenance (downsampling, retention) now and then.
    Failures (cannot open, disk full, I/O errors) never escape: they show in `status`
    and as ``journal_failed``/``journal_recovered`` events; frames that could not be
    written are counted.

    Args:
        state_dir: directory of the journal.
        clock: wall time for retention and the run's stop time.
        section: the ``[journal]`` configuration.
        run_id: this agent run.
        node: node name.
        started_at: the run's start (Unix seconds).
        info_json: /v1/info of the run, kept for snapshots made from the journal alone.
        config_json: the redacted configuration, likewise.
    """

    def __init__(self, state_dir: str | Path, clock: Clock, section: JournalSection, run_id: str, node: str,
                 started_at: float, info_json: str | None = None, config_json: str | None = None) -> None:
        self.path = journal_path(state_dir)
        self.clock = clock
        self.section = section
        self.retention = Retention.from_config(section)
        self.run_id = run_id
        self.node = node
        self.started_at = started_at
        self._info_json = info_json
        self._config_json = config_json
        self._queue: queue.Queue[object] = queue.Queue(maxsize=section.queue_frames)
        self._thread: threading.Thread | None = None
        self._sink: EventSink | None = None
        self._status = CollectorStatus(state="pending", ok=False)
        self._dropped = 0
        self._lost = 0
        self._reported_dropped = 0
        self.frames_written = 0

    @property
    def status(self) -> CollectorStatus:
        """Health of the journal, shown like a collector's in every frame."""
        return self._status

    def start(self, sink: EventSink | None = None) -> None:
        """Start the writer thread; ``sink`` receives events (called from that thread)."""
        self._sink = sink
        self._thread = threading.Thread(target=self._run, name="rigmon-journal", daemon=True)
        self._thread.start()

    def submit(self, frame: Frame) -> None:
        """Queue a frame (never blocks; a full queue drops the frame and counts it)."""
        try:
            self._queue.put_nowait(frame)
        except queue.Full:
            self._dropped += 1

    def close(self, timeout_s: float = 10.0) -> None:
        """Write what is queued, record the clean stop, and end the thread."""
        if self._thread is None:
            return
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._queue.put(_STOP, timeout=0.1)
                break
            except queue.Full:
                if time.monotonic() > deadline:
                    return
        self._thread.join(max(0.0, deadline - time.monotonic()))
        self._thread = None

    def _emit(self, kind: str, severity: Severity, message: str,
              data: dict[str, str | int | float | bool | None] | None = None) -> None:
        if self._sink is not None:
            try:
                self._sink(kind, severity, "journal", message, data or {})
            except Exception:  # noqa: BLE001 - reporting must not kill the writer
                log.exception("journal event sink failed")

    def _set_status(self, error: str | None, duration_s: float | None = None) -> None:
        before = self._status
        now = self.clock.time()
        if error is None:
            self._status = CollectorStatus(state="ok", ok=True, duration_s=duration_s, sampled_at=now)
            if before.state == "error":
                self._emit("journal_recovered", "info", f"journal {self.path} writable again")
        else:
            self._status = CollectorStatus(state="error", ok=False, error=error, duration_s=duration_s,
                                           sampled_at=now)
            if before.state != "error":
                self._emit("journal_failed", "warning", f"journal {self.path}: {error}", {"error": error})

    def _open(self) -> JournalStore | None:
        try:
            store = JournalStore(self.path, self.clock, self.retention)
            unclean = store.begin_run(self.run_id, self.node, self.started_at, self._info_json, self._config_json)
        except (JournalError, sqlite3.Error, OSError) as exc:
            self._set_status(str(exc))
            return None
        for run in unclean:
            message, data = unclean_message(run, self.started_at)
            self._emit("unclean_shutdown", "warning", message, data)
        self._set_status(None)
        return store

    def _run(self) -> None:
        store = self._open()
        next_open = time.monotonic() + 10.0
        next_maintain = time.monotonic() + 1.0
        last_commit = 0.0
        stopping = False
        while not stopping:
            batch: list[Frame] = []
            try:
                item = self._queue.get(timeout=1.0)
            except queue.Empty:
                item = None
            # Commit at most every commit interval: gather what arrives until then.
            wait_until = last_commit + self.section.commit_interval_s
            while item is not None:
                if item is _STOP:
                    stopping = True
                    break
                assert isinstance(item, Frame)
                batch.append(item)
                remaining = wait_until - time.monotonic()
                try:
                    item = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
                except queue.Empty:
                    item = None
            if store is None and time.monotonic() >= next_open:
                store = self._open()
                next_open = time.monotonic() + 10.0
            if batch:
                last_commit = time.monotonic()
                self._write(store, batch)
            if store is not None and (time.monotonic() >= next_maintain or stopping):
                next_maintain = time.monotonic() + MAINTAIN_EVERY_S
                self._maintain(store)
        if store is not None:
            try:
                store.end_run(self.run_id, self.clock.time())
            except sqlite3.Error as exc:
                log.warning("journal: cannot record the clean stop: %s", exc)
            store.close()

    def _write(self, store: JournalStore | None, batch: list[Frame]) -> None:
        if store is None:
            self._lost += len(batch)
            return
        t0 = time.monotonic()
        try:
            store.write(batch)
        except (sqlite3.Error, OSError) as exc:
            self._lost += len(batch)
            self._set_status(f"{exc}; {self._lost} frames not recorded")
            if isinstance(exc, sqlite3.OperationalError) and "full" in str(exc):
                # Give retention a chance to make room before the next batch.
                self._maintain(store)
            return
        self.frames_written += len(batch)
        dropped = self._dropped
        if dropped != self._reported_dropped:
            self._emit("journal_dropped", "warning",
                       f"journal writer fell behind: {dropped - self._reported_dropped} frames not recorded",
                       {"dropped_total": dropped})
            self._reported_dropped = dropped
        self._set_status(None, round(time.monotonic() - t0, 6))

    def _maintain(self, store: JournalStore) -> None:
        try:
            store.maintain()
        except (sqlite3.Error, OSError, JournalError) as exc:
            self._set_status(f"maintenance failed: {exc}")
