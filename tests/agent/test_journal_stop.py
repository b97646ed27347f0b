"""The journal writer's stop leaves nothing writing after it (the simulator removes the state directory
right after): past the stop's deadline the writer abandons its queue, counted; one stuck in a disk write
writes nothing more when the write returns. A journal never creates a removed state directory again."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from rigmon.agent.journal import (
    JournalError,
    JournalReader,
    JournalStore,
    JournalWriter,
)
from rigmon.agent.journal import writer as writer_module
from rigmon.config import JournalSection
from rigmon.schema import Frame
from tests.agent.journal_frames import T0, FakeClock, frame

#: Frames written before the write that does not return in time, and frames queued behind it.
WRITTEN = 3
QUEUED = 7


class SlowDiskWriter(JournalWriter):
    """A writer whose commit of frame `WRITTEN` returns only when ``returns`` is set (a disk that
    stalls in its flush: the frame is committed, the call has not returned)."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir, FakeClock(), JournalSection(commit_interval_s=0.001), "run1", "n1", T0)
        self.stalled = threading.Event()
        self.returns = threading.Event()

    def _write(self, store: JournalStore | None, batch: list[Frame]) -> JournalStore | None:
        store = super()._write(store, batch)
        if any(f.seq == WRITTEN for f in batch):
            self.stalled.set()
            self.returns.wait(30)
        return store


def stalled_with_a_queue(writer: SlowDiskWriter) -> threading.Thread:
    """Start ``writer``, let it write `WRITTEN` frames (the last one stalls), queue `QUEUED` more."""
    writer.start()
    for seq in range(1, WRITTEN + 1):
        writer.submit(frame(seq, T0 + seq, 1.0))
        for _ in range(1000):
            if writer.frames_written >= seq:
                break
            time.sleep(0.01)
    assert writer.stalled.wait(10)
    for seq in range(WRITTEN + 1, WRITTEN + QUEUED + 1):
        writer.submit(frame(seq, T0 + seq, 1.0))
    thread = writer._thread
    assert thread is not None
    return thread


def test_a_stop_past_its_deadline_abandons_the_queue_and_ends_the_writer(tmp_path: Path) -> None:
    """The write in progress returns after the deadline: the queued frames are not written (counted),
    the stop is not recorded as clean, and `close` returns with the thread ended and the journal closed."""
    writer = SlowDiskWriter(tmp_path)
    thread = stalled_with_a_queue(writer)
    # The stalled write returns once the writer is told to abandon (close, past its deadline).
    threading.Thread(target=lambda: writer._abandon.wait(30) and writer.returns.set(), daemon=True).start()
    writer.close(timeout_s=0.05)
    assert not thread.is_alive()
    assert not (tmp_path / "journal.sqlite3-wal").exists()  # closed: the last connection removes its WAL
    assert (writer.frames_written, writer.frames_not_written) == (WRITTEN, QUEUED)
    with JournalReader(tmp_path) as reader:
        assert reader.count_frames(T0, T0 + 100) == WRITTEN
        assert reader.runs()[0].clean is not True  # the next start reports it


def test_a_writer_left_in_a_stuck_write_writes_nothing_more_when_it_returns(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A write blocked in the kernel cannot be interrupted: `close` returns without it; when it returns
    the thread ends without writing the queue, the clean stop, or closing its connection."""
    monkeypatch.setattr(writer_module, "ABANDON_WAIT_S", 0.05, raising=False)
    writer = SlowDiskWriter(tmp_path)
    thread = stalled_with_a_queue(writer)
    try:
        writer.close(timeout_s=0.05)
        assert thread.is_alive()  # still in its write
    finally:
        writer.returns.set()
    thread.join(10)
    assert not thread.is_alive()
    assert (writer.frames_written, writer.frames_not_written) == (WRITTEN, QUEUED)
    with JournalReader(tmp_path) as reader:
        assert reader.count_frames(T0, T0 + 100) == WRITTEN
        assert reader.runs()[0].clean is not True
    assert writer._left_open is not None  # not closed: its close would checkpoint and remove the WAL by name
    assert (tmp_path / "journal.sqlite3-wal").exists()


def test_a_journal_creates_its_state_directory_but_not_the_directories_above(tmp_path: Path) -> None:
    JournalStore(tmp_path / "state", FakeClock()).close()  # the directory itself: made
    assert (tmp_path / "state" / "journal.sqlite3").is_file()
    removed = tmp_path / "rigmon-sim-x"  # a rig's temporary directory, removed at its end
    with pytest.raises(JournalError, match=f"{removed / 'state'} does not exist"):
        JournalStore(removed / "state" / "n1", FakeClock())
    assert not removed.exists()


def test_a_writer_does_not_create_its_removed_state_directory_again(tmp_path: Path) -> None:
    """A journal opened again (after damage, or a failed open) once its owner removed the state directory."""
    state = tmp_path / "state"
    writer = JournalWriter(state, FakeClock(), JournalSection(), "run1", "n1", T0)
    store = writer._open()  # the first open makes the directory
    assert store is not None
    store.close()
    shutil.rmtree(state)
    assert writer._open() is None
    assert not state.exists()
    error = writer.status.error or ""
    assert writer.status.state == "error" and f"state directory {state} is gone" in error


def test_a_writer_whose_first_open_failed_still_makes_its_state_directory(tmp_path: Path) -> None:
    """A state directory that could not be made at the first open (its parent missing) was never there:
    the next open makes it, not refuses it as one "removed while the agent ran"."""
    state = tmp_path / "not-yet" / "state"
    writer = JournalWriter(state, FakeClock(), JournalSection(), "run1", "n1", T0)
    assert writer._open() is None
    assert "removed while the agent ran" not in (writer.status.error or "")
    state.parent.mkdir()  # the operator makes the directory above
    store = writer._open()
    assert store is not None, writer.status.error
    store.close()
    assert (state / "journal.sqlite3").is_file()
