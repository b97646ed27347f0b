"""A journal begun afresh says why, first thing: the one written before was set aside (damaged, unwritable,
of a newer format), removed or replaced under the agent. A ``journal_begun`` event is written with the
run's start record in the new journal (an event like any other: older readers read it as one)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from rigmon.agent.journal import JournalReader, JournalWriter
from rigmon.alarms.event_kinds import check_event_rule
from rigmon.config import JournalSection
from rigmon.schema import Event
from tests.agent.journal_frames import T0, FakeClock
from tests.agent.test_journal_close import until, written
from tests.agent.test_journal_stop_events import remove_journal

STAMP = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(T0))


def started(state: Path) -> JournalWriter:
    writer = JournalWriter(state, FakeClock(), JournalSection(commit_interval_s=0.001), "run1", "n1", T0)
    writer.start()
    return writer


def first_event(path: Path) -> Event:
    with JournalReader(path) as reader:
        return reader.events(T0 - 1, T0 + 100)[0]


def test_a_journal_begun_after_a_damaged_one_was_set_aside_says_so(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "journal.sqlite3").write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    writer = started(state)
    until(lambda: writer.status.state == "ok", "a new journal opened")
    (kept,) = state.glob("journal.sqlite3.damaged-*")
    begun = first_event(writer.path)  # before any frame: in the commit that began the journal
    assert writer.close(timeout_s=10.0)
    assert (begun.kind, begun.severity, begun.id) == ("journal_begun", "warning", "run1-journal-1")
    assert begun.message.startswith(f"journal begun afresh at {STAMP} UTC: the journal written before could not "
                                    f"be used (")
    assert f"and was kept as {kept.name}; what it holds is not in this file" in begun.message
    assert (begun.data["reason"], begun.data["kept_as"], begun.data["noticed_at"]) == ("set_aside", str(kept), T0)


def test_a_journal_begun_after_the_file_was_removed_says_so(tmp_path: Path) -> None:
    writer = started(tmp_path / "state")
    written(writer, 1, 2)
    remove_journal(writer.path.parent)
    written(writer, 3, 3)
    begun = first_event(writer.path)
    assert writer.close(timeout_s=10.0)
    assert begun.kind == "journal_begun" and begun.data["reason"] == "removed"
    assert begun.message == (f"journal begun afresh at {STAMP} UTC: the journal file written before was removed "
                             "while the agent ran; what it held is not in this file")


def test_a_journal_replaced_under_the_writer_says_so_in_the_file_now_there(tmp_path: Path) -> None:
    writer = started(tmp_path / "state")
    written(writer, 1, 2)
    state = writer.path.parent
    live, copy = sqlite3.connect(writer.path), sqlite3.connect(state / "copy")
    live.backup(copy)
    live.close()
    copy.close()
    remove_journal(state)
    (state / "copy").rename(writer.path)
    written(writer, 3, 3)
    assert writer.close(timeout_s=10.0)
    with JournalReader(writer.path) as reader:
        (begun,) = [e for e in reader.events(T0 - 1, T0 + 100) if e.kind == "journal_begun"]
    assert begun.data["reason"] == "replaced"
    assert "the journal file this agent wrote was replaced while it ran" in begun.message


def test_a_journal_that_simply_goes_on_says_nothing_of_a_beginning(tmp_path: Path) -> None:
    writer = started(tmp_path / "state")
    written(writer, 1, 2)
    assert writer.close(timeout_s=10.0)
    with JournalReader(writer.path) as reader:
        assert reader.events(T0 - 1, T0 + 100) == []


def test_an_event_rule_on_journal_begun_is_refused() -> None:
    """It travels in no frame, so no rule in the agent would ever see it."""
    with pytest.raises(ValueError, match="'journal_begun' events are written in the journal only"):
        check_event_rule("journal_begun", {})
