"""The journal writer reports its failures instead of raising: a full disk, a journal it cannot open or
of a newer format, a crash's damage, a frame it cannot encode, a bug in its own thread."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rigmon.agent.journal import JournalReader, JournalStore, JournalWriter
from rigmon.config import JournalSection
from rigmon.schema import Event, Frame, Severity
from tests.agent.journal_frames import T0, FakeClock, frame


def test_writer_reports_a_full_disk_and_keeps_running(tmp_path: Path) -> None:
    clock = FakeClock()
    events: list[tuple[str, str]] = []
    failed = threading.Event()

    def sink(kind: str, severity: str, subject: str, message: str, data: object) -> None:
        events.append((kind, message))
        if kind == "journal_failed":
            failed.set()

    class FullDiskWriter(JournalWriter):
        def _open(self) -> JournalStore | None:
            store = super()._open()
            assert store is not None
            # A page cap at the current size makes SQLite answer exactly as on a full disk (SQLITE_FULL).
            pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
            store.conn.execute(f"PRAGMA max_page_count = {pages}")
            return store

    writer = FullDiskWriter(tmp_path, clock, JournalSection(commit_interval_s=0.05), "run1", "n1", T0)
    writer.start(sink)
    for i in range(200):
        writer.submit(frame(i + 1, T0 + i, float(i)))
    assert failed.wait(10)
    assert writer.status.state == "error"
    assert "full" in (writer.status.error or "")
    writer.submit(frame(201, T0 + 201, 1.0))  # still accepts frames, never raises
    writer.close()
    assert any(kind == "journal_failed" and "full" in msg for kind, msg in events)
    with JournalReader(tmp_path) as reader:
        assert reader.runs()[0].clean is True  # the stop was still recorded as clean


class EventLoopback:
    """Like the agent: events from the writer's sink travel in the next frame submitted."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: list[Event] = []
        self.seen: dict[str, Event] = {}
        self.seq = 0

    def sink(self, kind: str, severity: Severity, subject: str, message: str,
             data: dict[str, str | int | float | bool | None]) -> None:
        with self.lock:
            event = Event(id=f"run1-e{len(self.seen) + 1}", at=T0 + self.seq, kind=kind, severity=severity,
                          subject=subject, message=message, data=dict(data))
            self.pending.append(event)
            self.seen.setdefault(kind, event)

    def next_frame(self) -> Frame:
        with self.lock:
            events, self.pending = tuple(self.pending), []
            self.seq += 1
            return frame(self.seq, T0 + self.seq, 1.0, events=events)


def submit_until(writer: JournalWriter, loop: EventLoopback, done: Callable[[], bool]) -> None:
    for _ in range(2000):
        if done():
            return
        writer.submit(loop.next_frame())
        time.sleep(0.005)
    raise AssertionError("condition not met")


def test_writer_records_its_failure_and_recovery_once_it_can_write(tmp_path: Path) -> None:
    loop = EventLoopback()
    room = threading.Event()

    class RefusingUntilRoomWriter(JournalWriter):
        # Not the page cap of the test above: pages freed by the failed writes let some later
        # ones through, and the journal would flap. query_only refuses every write until lifted.
        def _write(self, store: JournalStore | None, batch: list[Frame]) -> JournalStore | None:
            if store is not None:
                store.conn.execute(f"PRAGMA query_only = {0 if room.is_set() or loop.seq < 5 else 1}")
            return super()._write(store, batch)

    writer = RefusingUntilRoomWriter(tmp_path, FakeClock(), JournalSection(commit_interval_s=0.01), "run1", "n1", T0)
    writer.start(loop.sink)
    submit_until(writer, loop, lambda: "journal_failed" in loop.seen)
    # The frames after it (the first carries journal_failed) are lost as well.
    lost_before = writer.frames_not_written
    submit_until(writer, loop, lambda: writer.frames_not_written >= lost_before + 5)
    room.set()
    submit_until(writer, loop, lambda: "journal_recovered" in loop.seen)
    submit_until(writer, loop, lambda: not loop.pending)  # the recovery travels in the next frame
    writer.close()
    recovered = loop.seen["journal_recovered"]
    assert writer.frames_not_written > 5
    assert recovered.data["frames_not_written"] == writer.frames_not_written
    assert f"{writer.frames_not_written} frames not recorded" in recovered.message
    with JournalReader(tmp_path) as reader:
        assert reader.count_frames(T0, T0 + loop.seq) == loop.seq - writer.frames_not_written
        kinds = [e.kind for e in reader.events(T0, T0 + loop.seq)]
        assert kinds.count("journal_failed") == 1 and kinds.count("journal_recovered") == 1
        assert [e for e in reader.events(T0, T0 + loop.seq) if e.kind == "journal_recovered"] == [recovered]


def test_writer_reports_a_journal_it_cannot_open(tmp_path: Path) -> None:
    (tmp_path / "blocked").write_text("a file where the state directory should be")
    failed = threading.Event()
    writer = JournalWriter(tmp_path / "blocked", FakeClock(), JournalSection(), "run1", "n1", T0)
    writer.start(lambda kind, *rest: failed.set() if kind == "journal_failed" else None)
    writer.submit(frame(1, T0, 1.0))
    assert failed.wait(10)
    assert writer.status.state == "error" and "cannot open journal" in (writer.status.error or "")
    writer.close()


def test_a_journal_of_a_newer_format_is_set_aside_not_written_over(tmp_path: Path) -> None:
    # Written by a newer rigmon (an agent downgraded): its layout is not this agent's to know.
    store = JournalStore(tmp_path, FakeClock())
    store.write([frame(1, T0, 1.0)])
    store.conn.execute("UPDATE meta SET value = '99' WHERE key = 'format'")
    store.close()
    seen: dict[str, dict[str, object]] = {}
    opened = threading.Event()
    writer = JournalWriter(tmp_path, FakeClock(), JournalSection(commit_interval_s=0.01), "run2", "n1", T0 + 10)

    def sink(kind: str, severity: str, subject: str, message: str, data: dict[str, object]) -> None:
        seen[kind] = {"message": message, **data}
        opened.set()

    writer.start(sink)
    writer.submit(frame(1, T0 + 10, 2.0, run_id="run2"))
    assert opened.wait(10)
    writer.close()
    assert "journal_set_aside" in seen and "unclean_shutdown" not in seen
    assert "format 99, newer than" in str(seen["journal_set_aside"]["message"])
    kept = Path(str(seen["journal_set_aside"]["kept_as"]))
    # Kept as it was: its format row and its frame.
    with JournalReader(kept) as old:
        assert old.conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()[0] == "99"
        assert [f.seq for f in old.frames(T0, T0)] == [1]
    with JournalReader(tmp_path) as new:
        assert [f.run_id for f in new.frames(T0, T0 + 10)] == ["run2"]


@pytest.mark.parametrize("damage", ["cut", "bad-header-of-a-page"])
def test_a_crash_that_damaged_the_journal_is_still_reported(tmp_path: Path, damage: str) -> None:
    # A power cut: the run never stopped, and the journal fails its check at the next start.
    store = JournalStore(tmp_path, FakeClock())
    store.begin_run("run1", "n1", T0)
    for start in range(0, 2000, 100):
        store.write([frame(i + 1, T0 + i, 11.9) for i in range(start, start + 100)])
    store.close()
    path = tmp_path / "journal.sqlite3"
    if damage == "cut":
        os.truncate(path, path.stat().st_size * 2 // 3)
    else:
        with open(path, "r+b") as fh:
            fh.seek(path.stat().st_size // 4096 // 2 * 4096)
            fh.write(b"\xff" * 4096)
    seen: dict[str, dict[str, object]] = {}
    done = threading.Event()
    writer = JournalWriter(tmp_path, FakeClock(T0 + 3000), JournalSection(commit_interval_s=0.01), "run2", "n1",
                           T0 + 3000)

    def sink(kind: str, severity: str, subject: str, message: str, data: dict[str, object]) -> None:
        seen[kind] = {"message": message, **data}
        if kind == "journal_set_aside":
            done.set()

    writer.start(sink)
    writer.submit(frame(1, T0 + 3000, 12.0, run_id="run2"))
    assert done.wait(10)
    for _ in range(1000):  # the journal open again, and the crash reported (a stop keeps later events)
        if writer.status.state == "ok":
            break
        time.sleep(0.01)
    writer.close()
    assert "unclean_shutdown" in seen and seen["unclean_shutdown"]["previous_run_id"] == "run1"
    assert str(seen["unclean_shutdown"]["message"]).startswith("node restarted unexpectedly; ")


def test_writer_waits_for_frames_until_its_next_own_work(tmp_path: Path) -> None:
    """Between frames the writer sleeps until its next maintenance, not a fixed second that
    races the 1 Hz frames (a second wake-up about every other frame)."""
    import queue

    waits: list[float | None] = []
    long_wait = threading.Event()

    class Recording(queue.Queue[object]):
        def get(self, block: bool = True, timeout: float | None = None) -> object:
            waits.append(timeout)
            if timeout is not None and timeout > 1.0:
                long_wait.set()
            return super().get(block, timeout)

    writer = JournalWriter(tmp_path, FakeClock(), JournalSection(), "run1", "n1", T0)
    writer._queue = Recording(maxsize=4)
    writer.start()
    writer.submit(frame(1, T0, 1.0))
    try:
        assert long_wait.wait(10), f"waits for a frame: {waits}"
    finally:
        writer.close()
    assert writer.frames_written == 1
    assert all(w is None or 0.0 <= w <= 15.0 for w in waits)


def test_a_frame_that_cannot_be_encoded_is_lost_and_said_so_and_the_writer_goes_on(tmp_path: Path) -> None:
    """A NaN a collector let through: the frame's batch is lost and counted, the journal reads error
    with the reason, and the next frames are written (the writer's thread used to die on it)."""
    loop = EventLoopback()
    writer = JournalWriter(tmp_path, FakeClock(), JournalSection(commit_interval_s=0.001), "run1", "n1", T0)
    writer.start(loop.sink)
    submit_until(writer, loop, lambda: writer.frames_written >= 3)
    writer.submit(frame(10_000, T0 + 9_999, float("nan")))
    submit_until(writer, loop, lambda: "journal_failed" in loop.seen)
    assert "cannot be written" in (loop.seen["journal_failed"].message)
    submit_until(writer, loop, lambda: "journal_recovered" in loop.seen)
    written = writer.frames_written
    submit_until(writer, loop, lambda: writer.frames_written >= written + 3)
    writer.close()
    assert writer.frames_not_written >= 1


def test_a_writer_that_stops_on_a_bug_says_so_in_its_status(tmp_path: Path) -> None:
    """A writer thread ended by an unexpected error left the journal "ok" while nothing was recorded."""
    loop = EventLoopback()

    class BuggyWriter(JournalWriter):
        def _write(self, store: JournalStore | None, batch: list[Frame]) -> JournalStore | None:
            if loop.seq > 3:
                raise RuntimeError("a bug")
            return super()._write(store, batch)

    writer = BuggyWriter(tmp_path, FakeClock(), JournalSection(commit_interval_s=0.001), "run1", "n1", T0)
    writer.start(loop.sink)
    submit_until(writer, loop, lambda: writer.status.state == "error")
    error = writer.status.error or ""
    assert f"the journal writer of {writer.path} stopped on an unexpected error (a bug: " in error
    assert "RuntimeError" not in error  # a sentence for the operator, not a class name
    assert "journal_failed" in loop.seen
    writer.close()
