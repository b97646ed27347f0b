"""A journal removed while the agent runs (its state directory deleted, or the file alone): SQLite
writes on into the unlinked file, which nobody can read, and the journal said ``ok`` on every
frame. The writer notices before its next commit (and at a maintenance pass), says so in its status,
and records again once a journal can be opened where it belongs (never making the removed state
directory again)."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from rigmon.agent.journal import JournalReader, JournalStore, JournalWriter
from rigmon.agent.journal import writer as writer_module
from rigmon.agent.journal.upkeep import go_on_always
from rigmon.config import JournalSection
from tests.agent.journal_frames import T0, FakeClock, frame
from tests.agent.test_journal_close import until, written


@pytest.fixture
def writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(writer_module, "MAINTAIN_EVERY_S", 0.05)
    state = tmp_path / "state"
    writer = JournalWriter(state, FakeClock(), JournalSection(commit_interval_s=0.001), "run1", "n1", T0)
    writer.start()
    yield writer
    writer.close(timeout_s=10.0)


def test_a_removed_state_directory_is_said_and_not_made_again(writer: JournalWriter) -> None:
    written(writer, 1, 2)
    shutil.rmtree(writer.path.parent)
    until(lambda: writer.status.state == "error", "the journal's status says it")
    for seq in range(3, 6):
        writer.submit(frame(seq, T0 + seq, 1.0))
    until(lambda: writer.frames_not_written >= 3, "the frames after the removal counted as not recorded")
    assert writer.status.state == "error" and writer.status.error
    assert not writer.path.parent.exists()  # its owner removed it: not made again


def test_a_removed_journal_file_is_said_and_a_new_one_records(writer: JournalWriter) -> None:
    written(writer, 1, 2)
    for leftover in writer.path.parent.glob(writer.path.name + "*"):
        leftover.unlink()  # the file with its WAL and shared memory
    until(lambda: writer.path.exists(), "a new journal where the removed one was")
    written(writer, 3, 4)
    with JournalReader(writer.path) as reader:
        assert reader.count_frames(T0, T0 + 100) >= 2  # frames 3 and 4, readable where readers look


def test_a_journal_file_removed_is_noticed_at_the_next_write_not_at_maintenance(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An operator's ``rm journal.sqlite3`` (the file alone, its WAL left): the next batch goes into a
    new journal where readers look, not into the removed file until a maintenance pass 15 s later."""
    monkeypatch.setattr(writer_module, "MAINTAIN_EVERY_S", 3600.0)  # no periodic pass finds it first
    events: list[tuple[str, str]] = []
    writer = JournalWriter(tmp_path / "state", FakeClock(), JournalSection(commit_interval_s=0.001), "run1", "n1", T0)
    writer.start(lambda kind, _sev, _subject, message, _data: events.append((kind, message)))
    try:
        written(writer, 1, 2)
        writer.path.unlink()
        written(writer, 3, 3)
        assert writer.path.exists(), "frame 3 went into the removed file"
        assert (writer.frames_not_written, writer.status.state) == (0, "ok")
        with JournalReader(writer.path) as reader:
            assert reader.count_frames(T0, T0 + 100) == 1  # frame 3, readable where readers look
        assert [kind for kind, _ in events] == ["journal_failed", "journal_recovered"]
        assert events[0][1] == (f"journal {writer.path}: the journal file was removed while the agent ran; frames are "
                                "not recorded until it can be opened again")
    finally:
        writer.close(timeout_s=10.0)


class PassCounting(JournalStore):
    """A store that counts its maintenance passes (the first one comes a second after the start)."""

    passes: list[int]

    def maintain(self, go_on: Callable[[], bool] = go_on_always) -> None:
        super().maintain(go_on)
        type(self).passes.append(1)


@pytest.fixture
def idle_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A started writer, and the kinds of its events, that has written frames 1 and 2 and run its first
    maintenance pass: nothing of it looks at the journal's file again before a batch or the stop."""
    monkeypatch.setattr(writer_module, "MAINTAIN_EVERY_S", 3600.0)
    monkeypatch.setattr(writer_module, "JournalStore", PassCounting)
    monkeypatch.setattr(PassCounting, "passes", [], raising=False)
    events: list[str] = []
    writer = JournalWriter(tmp_path / "state", FakeClock(), JournalSection(commit_interval_s=0.001), "run1", "n1", T0)
    writer.start(lambda kind, _sev, _subject, _message, _data: events.append(kind))
    written(writer, 1, 2)
    until(lambda: bool(PassCounting.passes), "the first maintenance pass")
    yield writer, events
    writer.close(timeout_s=10.0)


def next_start_reports(state: Path) -> list[str]:
    """The kinds of the events the next run's start emits on ``state`` (an unclean stop's among them)."""
    events: list[str] = []
    writer = JournalWriter(state, FakeClock(T0 + 50), JournalSection(), "run2", "n1", T0 + 50)
    writer.start(lambda kind, _sev, _subject, _message, _data: events.append(kind))
    until(lambda: writer.status.state != "pending", "the next start's journal opened")
    assert writer.close(timeout_s=10.0)
    return events


def test_a_journal_file_removed_just_before_the_stop_gets_the_clean_stop_where_readers_look(
        idle_writer: tuple[JournalWriter, list[str]]) -> None:
    """``rm journal.sqlite3`` and the agent stopped before its next commit: the clean stop goes into a new
    journal where readers look, not into the removed file (which left no record of the run at all)."""
    writer, events = idle_writer
    writer.path.unlink()
    assert writer.close(timeout_s=10.0)
    assert writer.path.exists(), "the clean stop went into the removed file"
    with JournalReader(writer.path) as reader:
        assert [(run.run_id, run.clean) for run in reader.runs()] == [("run1", True)]
        # No frame follows the stop: the clean stop's record carries them (not the sink: the sampler has stopped).
        assert [e.kind for e in reader.events(T0, T0 + 100)] == ["journal_begun", "journal_failed", "journal_recovered"]
    assert events == []
    assert "unclean_shutdown" not in next_start_reports(writer.path.parent)


def test_a_journal_replaced_just_before_the_stop_gets_the_clean_stop_not_an_unclean_report(
        idle_writer: tuple[JournalWriter, list[str]]) -> None:
    """A copy of the journal taken while the run ran put in its place (a backup restored), and the agent
    stopped before its next commit: the clean stop goes into the file now there, not into the replaced
    one, so the next start does not report from the copy that the run did not stop cleanly."""
    writer, _ = idle_writer
    state = writer.path.parent
    live, copy = sqlite3.connect(writer.path), sqlite3.connect(state / "copy")
    live.backup(copy)  # the run in it: started, not stopped
    live.close()
    copy.close()
    for journal_file in state.glob(writer.path.name + "*"):
        journal_file.unlink()  # the journal with its WAL and shared memory
    (state / "copy").rename(writer.path)
    assert writer.close(timeout_s=10.0)
    assert "unclean_shutdown" not in next_start_reports(state)
    with JournalReader(writer.path) as reader:
        assert {run.run_id: run.clean for run in reader.runs()} == {"run1": True, "run2": True}


def test_a_journal_removed_before_a_stop_past_its_deadline_is_not_opened_again(tmp_path: Path) -> None:
    """Past the stop's deadline no write begins (see `JournalWriter.close`): the clean stop's check
    opens no new journal then (the stop is recorded in the removed file, which nobody reads)."""
    writer = JournalWriter(tmp_path / "state", FakeClock(), JournalSection(), "run1", "n1", T0)
    store = writer._open()
    assert store is not None
    writer.path.unlink()
    writer._abandon.set()  # `close` past its deadline
    writer._end(store, complete=True)
    assert not writer.path.exists()
