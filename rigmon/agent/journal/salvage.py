"""Salvage: what can still be read of a damaged journal, copied into a new journal that reads as usual.

A journal cut short (a power cut during a write, a disk that filled) or with bad pages used to give
a snapshot nothing at all, or a traceback, though most of it was readable: the incident's frames
are usually in pages that are fine. `salvage` reads each table row by row, steps over the rows it
cannot read, checks what it reads (a frame stream decompresses, a block holds its frames, an event
decodes), and copies the rest into a journal of its own in a temporary directory. What it could
not read is said in `Salvaged.problems`.
"""

from __future__ import annotations

import sqlite3
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rigmon.agent.journal.blocks import decompress, gunzip_member, unpack_times
from rigmon.agent.journal.layout import FORMAT_VERSION, SCHEMA_SQL, JournalError, journal_path
from rigmon.agent.journal.read_only import check_journal_file
from rigmon.agent.journal.reader import JournalReader
from rigmon.schema import Event, SchemaError, decode

#: Rowids beyond this are not probed for (SQLite's rowids are 64-bit; the journal's stay far below).
MAX_ROWID = 2**62


class Salvaged:
    """A copy of what could be read of a damaged journal, open for reading; close it when done.

    Attributes:
        reader: a `JournalReader` of the copy.
        problems: one sentence per kind of data that could not be read whole.
        frames: frames recovered.
        events: events recovered.
    """

    def __init__(self, reader: JournalReader, tmp: tempfile.TemporaryDirectory[str], problems: list[str],
                 frames: int, events: int) -> None:
        self.reader = reader
        self._tmp = tmp
        self.problems = problems
        self.frames = frames
        self.events = events

    def close(self) -> None:
        """Close the copy and delete it."""
        self.reader.conn.close()
        self._tmp.cleanup()

    def __enter__(self) -> Salvaged:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def salvage(path: str | Path) -> Salvaged:
    """Copy every readable row of the journal at ``path`` (a file or its state directory).

    Raises:
        JournalError: nothing of it can be read (not a journal, or its first page is bad).
    """
    source_path = journal_path(path)
    src = _open(source_path)
    tmp = tempfile.TemporaryDirectory(prefix="rigmon-salvage-")
    try:
        dst = sqlite3.connect(Path(tmp.name) / "journal.sqlite3", isolation_level=None)
        dst.executescript(f"BEGIN;\n{SCHEMA_SQL}\nCOMMIT;")
        problems: list[str] = []
        dst.execute("BEGIN")
        tiers_whole = _copy_meta_and_tiers(src, dst, problems)
        _copy_simple(src, dst, "runs", "run_id, node, started_at, stopped_at, clean, info, config", problems)
        _copy_simple(src, dst, "dicts", "id, body", problems)
        events = _copy_events(src, dst, problems)
        frames = _copy_frames(src, dst, problems) + _copy_blocks(src, dst, problems)
        if not tiers_whole:
            # The readers compute the tiers from the frames recovered.
            dst.execute("DELETE FROM buckets")
            dst.execute("DELETE FROM meta WHERE key LIKE 'tier:%'")
        dst.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('format', ?)", (str(FORMAT_VERSION),))
        dst.execute("COMMIT")
        dst.close()
        reader = JournalReader(Path(tmp.name) / "journal.sqlite3")
    except BaseException:
        tmp.cleanup()
        raise
    finally:
        src.close()
    return Salvaged(reader, tmp, problems, frames, events)


def _open(path: Path) -> sqlite3.Connection:
    check_journal_file(path)
    for uri in (f"file:{quote(str(path))}?mode=ro", f"file:{quote(str(path))}?mode=ro&immutable=1"):
        conn = sqlite3.connect(uri, uri=True, timeout=5.0)
        try:
            # A file cut short is shorter than its header says: SQLite refuses it as corrupt unless
            # the schema may be "written" (it is not: the connection is read-only).
            conn.execute("PRAGMA writable_schema = ON")
            conn.execute("SELECT name FROM sqlite_master").fetchall()
            return conn
        except sqlite3.OperationalError as exc:
            conn.close()
            if getattr(exc, "sqlite_errorname", "") == "SQLITE_CANTOPEN":
                continue  # a read-only directory without the WAL index: immutable
            raise JournalError(f"nothing of journal {path} can be read: {exc}") from None
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise JournalError(f"nothing of journal {path} can be read: {exc}") from None
    raise JournalError(f"journal {path} cannot be opened")


def _rows(conn: sqlite3.Connection, table: str, columns: str) -> tuple[list[tuple[Any, ...]], int]:
    """Every row of ``table`` that can be read, by rowid, and how many stretches could not be.

    A scan stops at the first page it cannot read; the next readable row is then found by
    probing ever further rowids, and the first readable one between the last two probes.
    """
    scan = f"SELECT rowid, {columns} FROM {table} WHERE rowid > ? ORDER BY rowid"
    probe = f"SELECT rowid, {columns} FROM {table} WHERE rowid >= ? ORDER BY rowid LIMIT 1"
    out: list[tuple[Any, ...]] = []
    breaks = 0
    last = -MAX_ROWID
    while True:
        try:
            for row in conn.execute(scan, (last,)):
                out.append(row)
                last = row[0]
            return out, breaks
        except sqlite3.DatabaseError:
            breaks += 1
        found = _next_readable(conn, probe, last)
        if found is None:
            return out, breaks
        out.append(found)
        last = found[0]


def _next_readable(conn: sqlite3.Connection, probe: str, after: int) -> tuple[Any, ...] | None:
    """The first row after ``after`` that can be read (``None``: none, or none found)."""

    def read(at: int) -> tuple[Any, ...] | bool:
        try:
            row = conn.execute(probe, (at,)).fetchone()
        except sqlite3.DatabaseError:
            return False
        return True if row is None else tuple(row)

    bad = max(after, -MAX_ROWID)
    step = 1
    while True:
        at = bad + step
        if at > MAX_ROWID:
            return None
        result = read(at)
        if result is not False:
            break
        bad = at
        step *= 2
    good, good_result = at, result
    # The first readable probe between the last bad one and the good one.
    while good - bad > 1:
        mid = (bad + good) // 2
        r = read(mid)
        if r is False:
            bad = mid
        else:
            good, good_result = mid, r
    return good_result if isinstance(good_result, tuple) else None


def _copy_meta_and_tiers(src: sqlite3.Connection, dst: sqlite3.Connection, problems: list[str]) -> bool:
    """Meta rows and the stored buckets; whether the buckets were read whole."""
    meta, breaks = _rows(src, "meta", "key, value")
    dst.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", [r[1:] for r in meta])
    if breaks:
        problems.append("part of the journal's metadata")
    try:
        # WITHOUT ROWID: no row by row; the tiers are computed from the frames instead.
        buckets = src.execute("SELECT step_s, start_at, body FROM buckets").fetchall()
    except sqlite3.DatabaseError:
        problems.append("the stored min/mean/max buckets (computed from the frames recovered instead)")
        return False
    dst.executemany("INSERT OR REPLACE INTO buckets(step_s, start_at, body) VALUES (?, ?, ?)", buckets)
    return True


def _copy_simple(src: sqlite3.Connection, dst: sqlite3.Connection, table: str, columns: str,
                 problems: list[str]) -> None:
    rows, breaks = _rows(src, table, columns)
    marks = ", ".join("?" * len(columns.split(",")))
    dst.executemany(f"INSERT OR REPLACE INTO {table}({columns}) VALUES ({marks})", [r[1:] for r in rows])
    if breaks:
        problems.append(f"some rows of {table}")


def _copy_events(src: sqlite3.Connection, dst: sqlite3.Connection, problems: list[str]) -> int:
    rows, breaks = _rows(src, "events", "id, at, run_id, kind, severity, body")
    good = 0
    for row in rows:
        try:
            decode(Event, row[6])
        except (SchemaError, ValueError, TypeError):
            breaks += 1
            continue
        dst.execute("INSERT OR REPLACE INTO events(id, at, run_id, kind, severity, body) VALUES (?, ?, ?, ?, ?, ?)",
                    row[1:])
        good += 1
    if breaks:
        problems.append("some events")
    return good


def _copy_frames(src: sqlite3.Connection, dst: sqlite3.Connection, problems: list[str]) -> int:
    """The recent frames: each stream up to its first row that is missing or does not decompress."""
    has_stream = any(r[1] == "stream" for r in src.execute("PRAGMA table_info(frames)"))
    stream_col = "stream" if has_stream else "NULL"
    rows, breaks = _rows(src, "frames", f"id, taken_at, run_id, seq, dict_id, body, {stream_col}")
    lost = 0
    kept = 0
    for stream, group in _streams(rows):
        if stream is None:
            # Format 2: each row compressed on its own against a dictionary.
            for row in group:
                if not _decompresses(dst, row[5], row[6]):
                    lost += 1
                    continue
                dst.execute("INSERT INTO frames(id, taken_at, run_id, seq, dict_id, body, stream) "
                            "VALUES (?, ?, ?, ?, ?, ?, NULL)", row[1:7])
                kept += 1
            continue
        good = _readable_prefix(stream, group)
        lost += len(group) - len(good)
        for row in good:
            dst.execute("INSERT INTO frames(id, taken_at, run_id, seq, dict_id, body, stream) "
                        "VALUES (?, ?, ?, ?, NULL, ?, ?)", (*row[1:5], row[6], stream))
        kept += len(good)
    if breaks or lost:
        problems.append("some of the most recent frames" + (f" ({lost} read but unusable: damaged, or cut off "
                                                            "by damage before them)" if lost else ""))
    return kept


def _decompresses(dst: sqlite3.Connection, dict_id: int | None, body: bytes) -> bool:
    try:
        zdict = None
        if dict_id is not None:
            row = dst.execute("SELECT body FROM dicts WHERE id = ?", (dict_id,)).fetchone()
            if row is None:
                return False
            zdict = zlib.decompress(row[0])
        decompress(body, zdict)
    except (zlib.error, TypeError):
        return False
    return True


def _streams(rows: list[tuple[Any, ...]]) -> Iterator[tuple[int | None, list[tuple[Any, ...]]]]:
    groups: dict[int | None, list[tuple[Any, ...]]] = {}
    for row in rows:
        groups.setdefault(row[7], []).append(row)
    yield from groups.items()


def _readable_prefix(stream: int, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The rows of a stream that decompress: from its first row, consecutive, each ending a frame's line."""
    dec = zlib.decompressobj(31)
    lines = 0
    good: list[tuple[Any, ...]] = []
    expected = stream
    for row in rows:
        if row[1] != expected:
            break  # a row is missing: what follows does not decompress without it
        try:
            out = dec.decompress(row[6])
        except zlib.error:
            break
        lines += out.count(b"\n")
        if lines != len(good) + 1 or not out.endswith(b"\n"):
            break
        good.append(row)
        expected += 1
    return good


def _copy_blocks(src: sqlite3.Connection, dst: sqlite3.Connection, problems: list[str]) -> int:
    rows, breaks = _rows(src, "blocks", "id, min_at, max_at, run_id, frames, first_seq, last_seq, taken_at, body")
    bad = 0
    kept = 0
    for row in rows:
        try:
            times = unpack_times(row[8])
            lines = gunzip_member(row[9]).split(b"\n")
        except (zlib.error, JournalError, TypeError):
            bad += 1
            continue
        if len(times) != row[5] or len(lines) != row[5] + 1 or lines[-1]:
            bad += 1
            continue
        dst.execute("INSERT INTO blocks(id, min_at, max_at, run_id, frames, first_seq, last_seq, taken_at, body) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row[1:])
        kept += row[5]
    if breaks or bad:
        problems.append("some blocks of older frames" + (f" ({bad} did not decompress)" if bad else ""))
    return kept
