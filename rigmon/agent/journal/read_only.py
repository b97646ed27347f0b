"""Opening a journal read-only: the file checked first, and a read-only directory's journal read from a copy."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import stat
import tempfile
from pathlib import Path
from urllib.parse import quote

from rigmon.agent.journal.layout import JournalError


class ReadOnlyJournal:
    """A read-only connection to a journal, and the temporary copy it reads when it must; close it when done.

    Attributes:
        conn: the connection (its tables exist: the writer has created the journal).
        copy: the temporary directory holding a copy of the journal and its WAL, or ``None``
            when the journal is read in place.
    """

    def __init__(self, conn: sqlite3.Connection, copy: tempfile.TemporaryDirectory[str] | None) -> None:
        self.conn = conn
        self.copy = copy

    def close(self) -> None:
        """Close the connection and delete the copy, if any."""
        self.conn.close()
        if self.copy is not None:
            self.copy.cleanup()
            self.copy = None


def journal_file_error(path: Path, exc: OSError) -> JournalError:
    """The error to raise when the journal file ``path`` cannot be opened because of ``exc``.

    A state directory (or journal) this user may not read is not a missing journal: an operator
    running ``rigmon snapshot --journal /var/lib/rigmon`` as themselves, while the agent's state
    directory belongs to its own user, must be told to read it as that user, not that it is empty.
    """
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return JournalError(f"no journal at {path}")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return JournalError(f"cannot read journal {path}: permission denied (this user may not read it or its "
                            f"state directory {path.parent}; read it as the agent's user, or as root)")
    return JournalError(f"cannot read journal {path}: {exc.strerror or exc}")


def check_journal_file(path: Path) -> None:
    """Check that ``path`` is a file this user can open for reading.

    Raises:
        JournalError: it is absent (or not a file), or cannot be read (see `journal_file_error`).
    """
    # Not by opening it: closing a descriptor of the file drops every POSIX lock this process
    # holds on it, the agent's own writer connection's included (SQLite's documented hazard).
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise journal_file_error(path, exc) from None
    if not stat.S_ISREG(mode):
        raise JournalError(f"no journal at {path}")
    if not os.access(path, os.R_OK):
        raise journal_file_error(path, PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path)))


#: What SQLite says when it cannot create a WAL journal's ``-shm`` file beside it.
_NO_SHM_ERRORS = ("SQLITE_CANTOPEN", "SQLITE_READONLY_DIRECTORY")


def open_read_only(path: Path) -> ReadOnlyJournal:
    """Open the journal file ``path`` read-only.

    In WAL mode SQLite needs the ``-shm`` file even to read; in a directory it may not
    write (a read-only file system: a dead node's disk mounted ``ro``, or an agent's state
    directory remounted read-only) it cannot create one and the open fails. Then, without
    a WAL file to read (a clean stop), the file is opened ``immutable`` (nothing can write
    it there); with one (a crash), the journal and its WAL are copied to a temporary
    directory and read there, so the last seconds the WAL holds are not left out.

    Raises:
        JournalError: no journal there, not one this user may read, not one SQLite can read,
            or one whose tables are not created yet.
    """
    check_journal_file(path)
    copy: tempfile.TemporaryDirectory[str] | None = None
    try:
        try:
            conn, created = _connect(f"file:{quote(str(path))}?mode=ro")
        except sqlite3.OperationalError as exc:
            # CANTOPEN on a read-only file system; READONLY_DIRECTORY in a directory this user may
            # read but not write (the agent's state directory, mode 750, read by a member of its group).
            if getattr(exc, "sqlite_errorname", "") not in _NO_SHM_ERRORS or os.access(path.parent, os.W_OK):
                raise
            wal = path.with_name(path.name + "-wal")
            if not (wal.is_file() and wal.stat().st_size > 0):
                conn, created = _connect(f"file:{quote(str(path))}?mode=ro&immutable=1")
            else:
                copy = tempfile.TemporaryDirectory(prefix="rigmon-journal-")
                target = Path(copy.name) / path.name
                try:
                    shutil.copyfile(path, target)
                    shutil.copyfile(wal, target.with_name(target.name + "-wal"))
                except OSError as err:
                    raise sqlite3.OperationalError(
                        f"cannot copy it to read it outside a read-only directory: {err}") from None
                conn, created = _connect(f"file:{quote(str(target))}?mode=ro")
    except sqlite3.Error as exc:
        if copy is not None:
            copy.cleanup()
        raise JournalError(f"cannot read journal {path}: {exc}") from None
    opened = ReadOnlyJournal(conn, copy)
    if not created:
        opened.close()
        raise JournalError(f"journal {path} is not created yet")
    return opened


def _connect(uri: str) -> tuple[sqlite3.Connection, bool]:
    """A read-only connection to ``uri``, and whether the journal's tables exist."""
    conn = sqlite3.connect(uri, uri=True, timeout=5.0)
    try:
        # The writer creates the tables and this row in one transaction: without the
        # row the file is still being created (or is no journal), not a readable one.
        created = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() is not None
    except BaseException:
        conn.close()
        raise
    return conn, created
