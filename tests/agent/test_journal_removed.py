"""A journal removed while the agent runs (its state directory deleted, or the file alone): SQLite
writes on into the unlinked file, which nobody can read, and the journal said ``ok`` on every
frame. The writer notices before its next commit (and at a maintenance pass), says so in its status,
and records again once a journal can be opened where it belongs (never making the removed state
directory again)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rigmon.agent.journal import JournalReader, JournalWriter
from rigmon.agent.journal import writer as writer_module
from rigmon.config import JournalSection
from tests.agent.test_journal import T0, FakeClock, frame
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
