"""A journal writer started again after its `close` (the agent object started again in the same
process) is a new run: the last stop's marks (its stop asked, its deadline passed, the thread's
fate) must not cut the new run's maintenance short nor abandon its frames; and it is not started
again while the last run's thread, left in a stuck disk write, still lives."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from rigmon.agent.journal import JournalReader, JournalStore, JournalWriter
from rigmon.agent.journal import writer as writer_module
from rigmon.agent.journal.upkeep import go_on_always
from rigmon.config import JournalSection
from tests.agent.journal_frames import T0, FakeClock, frame
from tests.agent.test_journal_close import until, written
from tests.agent.test_journal_stop import (
    QUEUED,
    WRITTEN,
    SlowDiskWriter,
    stalled_with_a_queue,
)


class GoOnStore(JournalStore):
    """A store that notes what its maintenance pass's ``go_on`` says as the pass begins."""

    goes_on: list[bool]

    def maintain(self, go_on: Callable[[], bool] = go_on_always) -> None:
        type(self).goes_on.append(go_on())
        super().maintain(go_on)


def test_a_writer_started_again_after_a_clean_close_runs_its_periodic_maintenance(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The last close asked the stop: the new run's periodic passes must not all be cut at once (no
    retention, no blocks, the tiers never kept)."""
    monkeypatch.setattr(writer_module, "MAINTAIN_EVERY_S", 0.05)
    monkeypatch.setattr(writer_module, "JournalStore", GoOnStore)
    monkeypatch.setattr(GoOnStore, "goes_on", [], raising=False)
    writer = JournalWriter(tmp_path, FakeClock(), JournalSection(commit_interval_s=0.001), "run1", "n1", T0)
    writer.start()
    written(writer, 1, 2)
    assert writer.close(timeout_s=10.0) is True
    before = len(GoOnStore.goes_on)
    writer.start()
    try:
        written(writer, 3, 4)
        until(lambda: len(GoOnStore.goes_on) >= before + 3, "three maintenance passes of the new run")
        assert all(GoOnStore.goes_on[before:]), "the new run's maintenance passes were cut short by the last stop"
    finally:
        writer.close(timeout_s=10.0)


def test_a_writer_started_again_after_an_abandoned_stop_writes_its_frames(tmp_path: Path) -> None:
    """The last stop passed its deadline (the writer told to abandon): the new run still writes."""
    writer = SlowDiskWriter(tmp_path)
    stalled_with_a_queue(writer)
    threading.Thread(target=lambda: writer._abandon.wait(30) and writer.returns.set(), daemon=True).start()
    assert writer.close(timeout_s=0.05) is True
    assert writer.frames_not_written == QUEUED
    writer.start()
    try:
        for seq in range(WRITTEN + QUEUED + 1, WRITTEN + QUEUED + 3):
            writer.submit(frame(seq, T0 + seq, 1.0))
        until(lambda: writer.frames_written >= WRITTEN + 2, "the new run's frames written")
    finally:
        assert writer.close(timeout_s=10.0) is True
    with JournalReader(tmp_path) as reader:
        assert reader.count_frames(T0, T0 + 100) == WRITTEN + 2


def test_a_writer_is_not_started_again_while_its_last_thread_lives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The last run's thread, left in a stuck write, must not go on beside a new one (it would take
    the new run's frames, and write after its close said it writes nothing more)."""
    monkeypatch.setattr(writer_module, "ABANDON_WAIT_S", 0.05)
    writer = SlowDiskWriter(tmp_path)
    thread = stalled_with_a_queue(writer)
    try:
        assert writer.close(timeout_s=0.05) is False
        with pytest.raises(RuntimeError, match="has not ended"):
            writer.start()
        assert writer._abandon.is_set()  # the stuck thread still writes nothing more when its call returns
    finally:
        writer.returns.set()
    thread.join(10)
    assert not thread.is_alive()
    assert writer.frames_not_written == QUEUED


def test_a_stop_the_last_thread_did_not_take_does_not_stop_the_next_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The last thread died of an error before its close queued the stop: that stop stayed in the
    queue, and the next run's thread took it at once and wrote nothing."""
    writer = JournalWriter(tmp_path, FakeClock(), JournalSection(commit_interval_s=0.001), "run1", "n1", T0)

    def broken(self: JournalWriter) -> None:
        raise RuntimeError("the writer's first open broke")

    monkeypatch.setattr(JournalWriter, "_record", broken)
    writer.start()
    until(lambda: writer._fate.ended, "the broken thread's end")
    assert writer.close(timeout_s=10.0) is True  # its stop stays queued: nobody took it
    monkeypatch.undo()
    writer.start()
    try:
        written(writer, 1, 3)
    finally:
        assert writer.close(timeout_s=10.0) is True


class CloseFails(JournalStore):
    """A store whose close fails as a damaged journal's can (a checkpoint reading a bad page)."""

    def close(self) -> None:
        super().close()
        raise sqlite3.DatabaseError("database disk image is malformed")


def test_a_close_that_fails_at_the_writers_end_is_a_warning_not_a_stopped_writer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(writer_module, "JournalStore", CloseFails)
    writer = JournalWriter(tmp_path, FakeClock(), JournalSection(commit_interval_s=0.001), "run1", "n1", T0)
    writer.start()
    written(writer, 1, 2)
    with caplog.at_level(logging.WARNING):
        assert writer.close(timeout_s=10.0) is True
    assert "journal writer stopped" not in (writer.status.error or ""), writer.status
    assert "closing it failed: database disk image is malformed" in caplog.text
    with JournalReader(writer.path) as reader:
        assert [f.seq for f in reader.frames(0.0, T0 + 10)] == [1, 2]
