"""What `rigmon snapshot --journal` says of a journal it cannot read: a sentence naming the file and what
is wrong with it, never a Python class name (``JournalError: ...``, ``DatabaseError: ...``)."""

from __future__ import annotations

import re
import sqlite3
import zlib
from pathlib import Path

import pytest

from rigmon.agent.journal import JournalError
from rigmon.agent.journal.layout import read_error
from rigmon.schema import SchemaError
from rigmon.snapshot.journal_part import read_journal

#: A Python class name as the old messages began: ``JournalError: ``, ``sqlite3.DatabaseError: ``.
CLASS_NAME = re.compile(r"\b(\w+\.)?[A-Z]\w*(Error|Exception|error)\b:")


@pytest.mark.parametrize("content", [b"not a journal at all " * 100, b"SQLite format 3\x00garbage"])
def test_a_journal_that_is_no_database_is_said_in_a_sentence(tmp_path: Path, content: bytes) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "journal.sqlite3").write_bytes(content)
    part = read_journal(state, 3600)
    assert part.error is not None
    assert not CLASS_NAME.search(part.error), part.error
    assert part.error.startswith(f"cannot read journal {state / 'journal.sqlite3'}: file is not a database")


@pytest.mark.parametrize(("exc", "said"), [
    (sqlite3.DatabaseError("database disk image is malformed"),
     "SQLite cannot read it (a damaged or foreign file): database disk image is malformed"),
    (zlib.error("Error -3 while decompressing data: incorrect header check"),
     "frames stored in it do not decompress (their bytes are damaged): Error -3 while decompressing data"),
    (SchemaError("$.seq: expected int"), "a record stored in it does not decode"),
    (ValueError("Expecting value: line 1 column 1 (char 0)"), "a record stored in it does not decode"),
    (PermissionError(13, "Permission denied"), "it cannot be read: Permission denied"),
])
def test_each_reading_error_is_a_sentence_naming_the_file(tmp_path: Path, exc: Exception, said: str) -> None:
    path = tmp_path / "journal.sqlite3"
    text = read_error(path, exc)
    assert text.startswith(f"journal {path}: {said}")
    assert not CLASS_NAME.search(text), text


def test_a_journal_error_naming_its_file_is_said_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    assert read_error(path, JournalError(f"no journal at {path}")) == f"no journal at {path}"
    assert read_error(path, JournalError("a frame block is truncated")) == f"journal {path}: a frame block is truncated"
