"""The journal file: its tables, format version and location, and the error it raises."""

from __future__ import annotations

import sqlite3
import zlib
from pathlib import Path

JOURNAL_FILE = "journal.sqlite3"
#: 3: frames are written into one gzip stream per block (``frames.stream``) and compressed once;
#: 2: each frame zlib-compressed against a preset dictionary (``frames.dict_id``), recompressed
#: into a block later. Format 2 rows still read, and are moved into blocks as before.
FORMAT_VERSION = 3

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs(
    run_id TEXT PRIMARY KEY, node TEXT NOT NULL, started_at REAL NOT NULL,
    stopped_at REAL, clean INTEGER, info TEXT, config TEXT);
CREATE TABLE IF NOT EXISTS dicts(id INTEGER PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS frames(
    id INTEGER PRIMARY KEY, taken_at REAL NOT NULL, run_id TEXT NOT NULL, seq INTEGER NOT NULL,
    dict_id INTEGER, body BLOB NOT NULL, stream INTEGER);
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


#: Format 2's ``frames`` table has no ``stream`` column; the writer adds it (the rows it had keep NULL).
UPGRADE_SQL = "ALTER TABLE frames ADD COLUMN stream INTEGER;"


class JournalError(Exception):
    """The journal cannot be opened or read; the message says why."""


def journal_path(state_dir: str | Path) -> Path:
    """The journal file in a state directory (or the file itself when given one).

    A journal the writer set aside (``journal.sqlite3.damaged-<UTC time>``) is a file too, so
    ``rigmon snapshot --journal`` can read what is left of it.
    """
    path = Path(state_dir)
    return path if path.suffix == ".sqlite3" or path.name.startswith(JOURNAL_FILE + ".") else path / JOURNAL_FILE


def read_error(path: Path, exc: BaseException) -> str:
    """What is wrong with the journal file ``path`` that reading it raised ``exc``: a sentence naming the
    file, for the operator (a bundle's ERRORS.txt, the command's message), never a Python class name.

    Args:
        path: the journal file read.
        exc: what reading it raised (`JournalError`, SQLite's, zlib's, a decoding error, an OS error).
    """
    text = str(exc).strip()
    if isinstance(exc, JournalError):
        # Its message says what is wrong, and mostly names the file already.
        return text if str(path) in text else f"journal {path}: {text}"
    if isinstance(exc, zlib.error):
        what = "frames stored in it do not decompress (their bytes are damaged)"
    elif isinstance(exc, sqlite3.DatabaseError):
        what = "SQLite cannot read it (a damaged or foreign file)"
    elif isinstance(exc, OSError):
        what, text = "it cannot be read", exc.strerror or text
    elif isinstance(exc, ValueError):
        what = "a record stored in it does not decode (damaged, or written by another rigmon)"
    else:
        what = "it cannot be read"
    return f"journal {path}: {what}: {text}" if text else f"journal {path}: {what}"
