"""A damaged journal: how it is recognised, and how it is set aside so that recording goes on.

A journal cut short, with a bad header or bad pages, something other than a file in its
place, or a file the agent may not write used to be reported and then nothing was recorded
again, across every restart, until someone deleted it by hand: the flight recorder was off
for good. Now the writer moves such a journal aside (renamed with a timestamp, kept for
forensics, its WAL file with it), says so in an event, and starts a new one.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
import zlib
from pathlib import Path
from urllib.parse import quote

from rigmon.agent.journal.layout import JournalError
from rigmon.agent.journal.reader import JournalReader
from rigmon.agent.journal.runs import UncleanRun

#: SQLite result codes (primary, as ``sqlite_errorname`` starts) that mean the file itself is bad.
DAMAGE_CODES = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
#: Files SQLite keeps beside a journal in WAL mode; they move with it.
COMPANIONS = ("-wal", "-shm")


class JournalDamaged(JournalError):
    """The journal file cannot be used as it is and must be set aside; the message says why."""


def check_usable(path: Path) -> None:
    """Refuse what is in the journal's place when it is not a regular file the agent can write.

    Raises:
        JournalDamaged: a directory (or another non-file) in its place, or a file the agent may not write.
        JournalError: the state directory is on a read-only file system (nothing is wrong with the
            journal, and it could not be set aside there either).
    """
    try:
        read_only = bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    if read_only:
        raise JournalError(f"journal {path}: the state directory is on a read-only file system; "
                           "nothing is recorded until it is writable")
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise JournalError(f"cannot open journal {path}: {exc.strerror}") from None
    if stat.S_ISDIR(mode):
        raise JournalDamaged(f"journal {path} is a directory")
    if not stat.S_ISREG(mode):
        raise JournalDamaged(f"journal {path} is not a regular file")
    if not os.access(path, os.R_OK | os.W_OK):
        raise JournalDamaged(f"journal {path} is not readable and writable by the agent")


def is_damage(exc: BaseException) -> bool:
    """Whether a SQLite error says the journal file is corrupt or not a database at all."""
    if isinstance(exc, JournalDamaged):
        return True
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name.startswith(DAMAGE_CODES):
        return True
    # Errors raised before a result code is known still say what they are.
    text = str(exc).lower()
    return isinstance(exc, sqlite3.DatabaseError) and ("malformed" in text or "not a database" in text)


def quick_check(conn: sqlite3.Connection) -> None:
    """Read every page of the journal once (SQLite's ``quick_check``).

    Raises:
        JournalDamaged: the check found bad pages or could not read the file.
    """
    try:
        rows = conn.execute("PRAGMA quick_check(1)").fetchall()
    except sqlite3.DatabaseError as exc:
        raise JournalDamaged(f"journal fails its check: {exc}") from None
    if rows != [("ok",)]:
        raise JournalDamaged(f"journal fails its check: {rows[0][0] if rows else 'no answer'}")


def runs_left_open(path: Path, run_id: str) -> list[UncleanRun]:
    """Runs of a journal set aside that never stopped cleanly (but ``run_id``, this agent's own).

    A power cut that damaged the journal is still a crash to report: its runs and, as far as
    they can be read, its final readings. Nothing when not even the runs can be read.
    """
    try:
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error:
        return []
    try:
        # A file cut short is shorter than its header says: read what it holds.
        conn.execute("PRAGMA writable_schema = ON")
        rows = conn.execute("SELECT run_id, node, started_at FROM runs WHERE stopped_at IS NULL AND run_id != ? "
                            "ORDER BY started_at", (run_id,)).fetchall()
        out: list[UncleanRun] = []
        for prev_id, node, started_at in rows:
            try:
                last, final = JournalReader(path, conn=conn).final_readings(prev_id)
                out.append(UncleanRun(prev_id, node, float(started_at), last, final))
            except (sqlite3.Error, JournalError, zlib.error, ValueError):
                out.append(UncleanRun(prev_id, node, float(started_at), None, {}, unreadable=True))
        return out
    except sqlite3.Error:
        return []
    finally:
        conn.close()


def set_aside(path: Path, now: float | None = None) -> Path:
    """Rename the journal (and its WAL files) to ``<name>.damaged-<UTC time>``; return the new path.

    Raises:
        OSError: it cannot be renamed (a read-only state directory).
    """
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while target.exists() or target.is_symlink():
        n += 1
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    os.rename(path, target)
    for suffix in COMPANIONS:
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            os.rename(companion, target.with_name(target.name + suffix))
    return target


def file_identity(path: Path) -> tuple[int, int] | None:
    """The device and inode of the file at ``path``; ``None`` when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def gone_from_under(path: Path, opened: tuple[int, int] | None) -> str | None:
    """Why the journal a writer has open (``opened``: its `file_identity` then) is no longer the file
    at ``path``, or ``None`` while it is: writing on would record into a file nobody can read."""
    if opened is None:
        return None
    now = file_identity(path)
    if now == opened:
        return None
    # The writer's event puts "journal <path>: " before this; its status shows it as it is.
    if now is not None:
        return "the journal file was replaced while the agent ran; recording into the file now there"
    what = "its state directory was removed" if not path.parent.is_dir() else "the journal file was removed"
    return f"{what} while the agent ran; frames are not recorded until it can be opened again"
