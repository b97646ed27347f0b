"""The journal writer's end, decided once: the thread closes the store, or `close` gives up on it and
the thread leaves the store alone; never both. Only frames not written make a stop unclean: a long
maintenance pass is cut short between two of its transactions, and the journal stays valid.
`when_ended` waits for the thread's very end (the agent releases the state directory's lock so).

The stop's waits are made to run out by the test (`GatedJoin`), not by the clock."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from rigmon.agent.journal import JournalReader, JournalStore, JournalWriter
from rigmon.agent.journal import writer as writer_module
from rigmon.agent.journal.damage import quick_check
from rigmon.config import JournalSection
from tests.agent.journal_frames import T0, FakeClock, frame
from tests.agent.test_journal_stop import (
    QUEUED,
    WRITTEN,
    SlowDiskWriter,
    stalled_with_a_queue,
)


class SlowCloseStore(JournalStore):
    """A store whose close (SQLite's checkpoint, the WAL's removal) waits until ``proceeds`` is set."""

    entered: threading.Event
    proceeds: threading.Event

    def close(self) -> None:
        type(self).entered.set()
        type(self).proceeds.wait(30)
        super().close()


@pytest.fixture
def slow_close(monkeypatch: pytest.MonkeyPatch) -> type[SlowCloseStore]:
    monkeypatch.setattr(SlowCloseStore, "entered", threading.Event(), raising=False)
    monkeypatch.setattr(SlowCloseStore, "proceeds", threading.Event(), raising=False)
    monkeypatch.setattr(writer_module, "JournalStore", SlowCloseStore)
    return SlowCloseStore


class GatedJoin:
    """Stands in for the writer's thread in `JournalWriter.close`: each of its waits (the deadline,
    then the abandon's) runs out when the test opens its gate, whatever the clock says."""

    def __init__(self, thread: threading.Thread) -> None:
        self.thread = thread
        self.deadline = threading.Event()
        self.abandon_wait = threading.Event()
        self._gates = iter([self.deadline, self.abandon_wait])

    def join(self, timeout: float | None = None) -> None:
        next(self._gates).wait(30)

    def is_alive(self) -> bool:
        return self.thread.is_alive()


def closing_in_background(writer: JournalWriter) -> tuple[threading.Thread, list[bool | None]]:
    """Run ``writer.close`` in a thread of its own; its result lands in the list."""
    result: list[bool | None] = []
    closer = threading.Thread(target=lambda: result.append(writer.close(timeout_s=0.01)), daemon=True)
    closer.start()
    return closer, result


def closing_past_the_deadline(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> tuple[
        SlowDiskWriter, threading.Thread, GatedJoin, threading.Thread, list[bool | None]]:
    """A writer stalled in a write with frames queued, its `close` running in the background and past
    its deadline (the writer told to abandon); the extra wait is the test's to end (``gated.abandon_wait``)."""
    caplog.set_level(logging.ERROR, logger=writer_module.__name__)
    writer = SlowDiskWriter(tmp_path)
    thread = stalled_with_a_queue(writer)
    gated = GatedJoin(thread)
    writer._thread = gated  # type: ignore[assignment]
    closer, result = closing_in_background(writer)
    gated.deadline.set()  # the deadline passes
    assert writer._abandon.wait(10)
    return writer, thread, gated, closer, result


def gave_up_log(caplog: pytest.LogCaptureFixture) -> bool:
    return any("writes nothing more" in r.getMessage() for r in caplog.records)


def test_a_writer_that_took_the_store_first_closes_it_and_close_does_not_say_it_writes_nothing_more(
        tmp_path: Path, slow_close: type[SlowCloseStore], caplog: pytest.LogCaptureFixture) -> None:
    """The stalled write returns just before the extra wait runs out; the thread goes on to close the
    store (a slow checkpoint). `close` must not give it up as "writing nothing more" meanwhile."""
    writer, thread, gated, closer, result = closing_past_the_deadline(tmp_path, caplog)
    writer.returns.set()  # the write returns just before the extra wait runs out
    assert slow_close.entered.wait(10)  # the thread is closing the store
    gated.abandon_wait.set()  # the extra wait runs out
    closer.join(10)
    assert not closer.is_alive()
    # The store's close has begun: `close` must not have said the writer writes nothing more.
    assert not gave_up_log(caplog), "close says the writer writes nothing more while it is closing the store"
    ended: list[bool] = []
    writer.when_ended(lambda: ended.append(thread.is_alive()))
    assert ended == []  # not before the thread's end
    slow_close.proceeds.set()
    thread.join(10)
    assert not (tmp_path / "journal.sqlite3-wal").exists()  # the thread closed the store
    assert result == [False]  # not ended when close returned
    assert ended == [True]  # called by the thread itself, as its last act
    assert writer._left_open is None
    assert (writer.frames_written, writer.frames_not_written) == (WRITTEN, QUEUED)
    with JournalReader(tmp_path) as reader:
        assert reader.count_frames(T0, T0 + 100) == WRITTEN
        assert reader.runs()[0].clean is not True


def test_a_writer_given_up_first_leaves_the_store_alone_and_ends_after_its_write(
        tmp_path: Path, slow_close: type[SlowCloseStore], caplog: pytest.LogCaptureFixture) -> None:
    """`close` gives up while the write is still stalled: when it returns, the thread writes nothing
    more, does not close the store, and only then counts as ended."""
    writer, thread, gated, closer, result = closing_past_the_deadline(tmp_path, caplog)
    gated.abandon_wait.set()  # the extra wait runs out with the write still stalled
    closer.join(10)
    assert result == [False] and gave_up_log(caplog)
    ended: list[bool] = []
    writer.when_ended(lambda: ended.append(writer._left_open is not None))
    assert ended == []
    writer.returns.set()
    thread.join(10)
    assert ended == [True]  # after the thread left the store open: its last act
    assert not slow_close.entered.is_set()  # never closed: no checkpoint, the WAL stays
    assert (tmp_path / "journal.sqlite3-wal").exists()
    assert (writer.frames_written, writer.frames_not_written) == (WRITTEN, QUEUED)
    later: list[str] = []
    writer.when_ended(lambda: later.append("now"))
    assert later == ["now"]  # once ended: at once


class LongUpkeepStore(JournalStore):
    """A store whose next maintenance pass, once ``long`` is set, goes on transaction after
    transaction until its ``go_on`` says no (then the next passes are short again), or until
    `close`'s deadline has passed (``deadline``, the writer's abandon)."""

    long: threading.Event
    in_pass: threading.Event
    deadline: threading.Event
    passes: list[int]

    def retain(self, *go_on_given: Callable[[], bool]) -> None:
        super().retain(*go_on_given)
        go_on = go_on_given[0] if go_on_given else (lambda: True)
        cls = type(self)
        cls.passes.append(1)
        while cls.long.is_set() and not cls.deadline.is_set():
            if not go_on():
                cls.long.clear()
                return
            cls.in_pass.set()
            with self.conn:
                self.conn.execute("BEGIN IMMEDIATE")
                self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('test:upkeep', 'x')")
            cls.deadline.wait(0.005)


def upkeep_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, maintain_every_s: float,
                  frames: int) -> JournalWriter:
    """A started writer on `LongUpkeepStore` (whose passes end at its own `close`'s deadline),
    periodic passes every ``maintain_every_s``, that has written ``frames`` frames."""
    monkeypatch.setattr(writer_module, "MAINTAIN_EVERY_S", maintain_every_s)
    writer = JournalWriter(tmp_path, FakeClock(), JournalSection(commit_interval_s=0.001), "run1", "n1", T0)
    monkeypatch.setattr(writer_module, "JournalStore", LongUpkeepStore)
    monkeypatch.setattr(LongUpkeepStore, "long", threading.Event(), raising=False)
    monkeypatch.setattr(LongUpkeepStore, "in_pass", threading.Event(), raising=False)
    monkeypatch.setattr(LongUpkeepStore, "deadline", writer._abandon, raising=False)
    monkeypatch.setattr(LongUpkeepStore, "passes", [], raising=False)
    writer.start()
    written(writer, 1, frames)
    return writer


def until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(3000):
        if condition():
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"never: {what}")


def written(writer: JournalWriter, first: int, last: int) -> None:
    for seq in range(first, last + 1):
        writer.submit(frame(seq, T0 + seq, 1.0))
    until(lambda: writer.frames_written >= last, f"{last} frames written")


def every_frame_and_a_clean_stop(writer: JournalWriter, path: Path, frames: int) -> None:
    """The writer wrote ``frames`` frames, lost none, and its journal holds them and a clean stop."""
    assert (writer.frames_written, writer.frames_not_written) == (frames, 0)
    with JournalReader(path) as reader:
        assert reader.count_frames(T0, T0 + 100) == frames
        assert [run.clean for run in reader.runs()] == [True]


def test_a_last_maintenance_pass_longer_than_the_deadline_leaves_a_clean_stop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every frame was written: the pass at the stop, cut short at the deadline, does not make the stop unclean."""
    writer = upkeep_writer(tmp_path, monkeypatch, 3600.0, 5)
    until(lambda: len(LongUpkeepStore.passes) >= 1, "the first periodic pass")  # the next: in an hour
    LongUpkeepStore.long.set()
    ended = writer.close(timeout_s=0.2)
    assert writer._abandon.is_set()  # the deadline passed, in the maintenance
    every_frame_and_a_clean_stop(writer, tmp_path, 5)
    assert ended is True
    JournalStore(tmp_path, FakeClock()).close()  # the next start opens it


def test_a_periodic_maintenance_pass_yields_to_the_frames_queued_at_the_stop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long pass the stop comes in is cut short for the frames queued behind it, which are written."""
    writer = upkeep_writer(tmp_path, monkeypatch, 0.05, 2)
    LongUpkeepStore.long.set()
    assert LongUpkeepStore.in_pass.wait(30)  # the writer's periodic pass, a long one
    for seq in range(3, 8):
        writer.submit(frame(seq, T0 + seq, 1.0))  # queued behind it
    writer.close(timeout_s=5.0)
    every_frame_and_a_clean_stop(writer, tmp_path, 7)


def test_a_maintenance_pass_cut_short_leaves_a_valid_journal_and_the_next_pass_goes_on(tmp_path: Path) -> None:
    clock = FakeClock()
    store = JournalStore(tmp_path, clock, block_frames=10, block_after_s=60.0)
    n = 200
    store.write([frame(i + 1, T0 + i, float(i % 7)) for i in range(n)])
    clock.t = T0 + n + 3600.0  # every frame old enough for a block
    before = store.frames_json(T0, T0 + n)
    asked = 0

    def go_on() -> bool:
        nonlocal asked
        asked += 1
        return asked <= 8  # the tiers, retention, then a few blocks

    store.maintain(go_on)
    blocks = store.conn.execute("SELECT COUNT(*) FROM blocks").fetchone()[0]
    assert 0 < blocks < n // 10  # cut short between two blocks
    store.close()
    again = JournalStore(tmp_path, clock, block_frames=10, block_after_s=60.0)  # the next start
    quick_check(again.conn)
    assert again.frames_json(T0, T0 + n) == before
    again.maintain()
    assert again.conn.execute("SELECT COALESCE(SUM(frames), 0) FROM blocks").fetchone()[0] == n
    assert again.frames_json(T0, T0 + n) == before
    again.close()
