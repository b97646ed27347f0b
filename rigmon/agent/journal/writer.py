"""The journal writer thread: frames from a bounded queue to the store, and its stop (what the thread does
with the store, and its failures, reported as events: `rigmon.agent.journal.recovery`)."""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rigmon.agent.journal.damage import (
    JournalDamaged,
    check_usable,
    file_identity,
    is_damage,
    quick_check,
)
from rigmon.agent.journal.fate import WriterFate
from rigmon.agent.journal.pacing import drain, idle_wait_s
from rigmon.agent.journal.recovery import EventSink, WriterRecovery
from rigmon.agent.journal.runs import UncleanRun
from rigmon.agent.journal.store import JournalStore
from rigmon.clock import Clock
from rigmon.config import JournalSection
from rigmon.schema import Event, Frame

log = logging.getLogger(__name__)

#: Real seconds between maintenance passes (downsampling, retention) of the writer thread.
MAINTAIN_EVERY_S = 15.0
#: Seconds `JournalWriter.close` waits for the frames queued at the stop and the clean stop's record.
CLOSE_TIMEOUT_S = 10.0
#: Seconds it waits more, past that deadline, for a writer told to abandon the rest to end.
ABANDON_WAIT_S = 2.0

_STOP = object()


class JournalWriter(WriterRecovery):
    """Writes frames to the journal from a thread of its own, so sampling never waits on disk.

    Frames go through a bounded queue; the thread commits what it has at least every
    ``commit_interval_s`` and runs maintenance (downsampling, retention) now and then.
    Failures (cannot open, disk full, I/O errors) never escape: they show in `status`
    and as ``journal_failed``/``journal_recovered`` events; frames that could not be
    written are counted (``journal_recovered`` says how many). The events of those frames
    (``journal_failed`` itself among them: it travels in the next frame, which the failing
    journal cannot take) are kept and written with the first frames that can be. What the
    thread does with its store, and how it recovers, is `WriterRecovery`'s.

    Args:
        state_dir: directory of the journal.
        clock: wall time for retention and the run's stop time.
        section: the ``[journal]`` configuration.
        run_id: this agent run.
        node: node name.
        started_at: the run's start (Unix seconds).
        info_json: /v1/info of the run, kept for snapshots made from the journal alone.
        config_json: the redacted configuration, likewise.
    """

    def __init__(self, state_dir: str | Path, clock: Clock, section: JournalSection, run_id: str, node: str,
                 started_at: float, info_json: str | None = None, config_json: str | None = None) -> None:
        super().__init__(state_dir, clock, section, run_id, node, started_at, info_json, config_json)
        self._queue: queue.Queue[object] = queue.Queue(maxsize=section.queue_frames)
        self._thread: threading.Thread | None = None
        #: Set by `close` as it begins: a periodic maintenance pass yields to the frames queued at the stop.
        self._stop_asked = threading.Event()
        #: The thread's end and `close`'s giving up on it, decided once (`WriterFate`).
        self._fate = WriterFate()
        #: The store an orphaned thread leaves open (see `close`).
        self._left_open: JournalStore | None = None

    def start(self, sink: EventSink | None = None) -> None:
        """Start the writer thread; ``sink`` receives events (called from that thread). A start after
        `close` is a new run: the last stop's marks (asked, abandoned, the thread's fate) are not its own.

        Raises:
            RuntimeError: the last start's thread has not ended (left in a stuck disk write by `close`).
        """
        self._fate.begin(str(self.path))
        self._release_events()
        self._drop_stop_marks()
        self._stop_asked.clear()
        self._abandon.clear()
        self._sink = sink
        self._thread = threading.Thread(target=self._run, name="rigmon-journal", daemon=True)
        self._thread.start()

    def _drop_stop_marks(self) -> None:
        """Take out of the queue a stop a last thread did not take (it died of an error first): it
        is not this run's. Frames queued before the start stay, in their order (no thread runs)."""
        for item in drain(self._queue):
            if item is not _STOP:
                self._queue.put_nowait(item)

    def submit(self, frame: Frame) -> None:
        """Queue a frame (never blocks; a full queue drops the frame and counts it)."""
        try:
            self._queue.put_nowait(frame)
        except queue.Full:
            self._dropped += 1

    def close(self, timeout_s: float | None = None, events: Sequence[Event] = ()) -> bool:
        """Write what is queued, record the clean stop, and end the thread.

        Within ``timeout_s`` (default `CLOSE_TIMEOUT_S`) the thread writes every frame queued before
        the stop, then records the run's clean stop, runs a last maintenance pass and closes the
        store. The clean stop's record carries the events no frame carried: ``events`` (the agent's
        last, emitted after its last frame), the writer's own from `hold_events` (or this call) on
        (a journal that failed or was replaced during the stop says so), and those of frames it
        could not write. Past that deadline it is told to abandon: the call in progress (one
        batch's commit, or one transaction of a maintenance pass) finishes, the frames still queued are not written
        (counted in `frames_not_written`, logged) and the stop is not recorded, so the next start
        reports the run as not stopped cleanly. Only frames not written make a stop unclean: a
        maintenance pass (the last, or a periodic one the stop came in: it yields to the frames) is
        cut short between two of its transactions, each whole; the next passes take up the rest.
        `close` waits `ABANDON_WAIT_S` more for the thread to end. (SQLite's interrupt is not used:
        it stays armed while any statement is open, and cut the checkpoint of the connection's close.)

        A write blocked in the kernel (a stuck disk) cannot be interrupted: when the thread has not
        ended by then, `close` returns without it (logged). Whether the thread still closes the
        store or is left behind is one decision (`WriterFate`), the thread's (`_end`) or this:
        an orphaned thread, when its call returns, writes nothing more and leaves its connection
        open, referenced here, until the process exits: SQLite's close would checkpoint the journal
        and remove its WAL file by name, in a directory its owner may be removing by then. Either
        way the thread's call still writes: see `when_ended`.

        Returns:
            whether the writer thread has ended (nothing of it writes any more).
        """
        thread = self._thread
        if thread is None:
            return self._fate.ended
        self._thread = None
        # Before the stop is queued: the thread takes them with it (the queue orders the two).
        self.hold_events()
        self._keep_for_stop(events)
        self._stop_asked.set()
        if timeout_s is None:
            timeout_s = CLOSE_TIMEOUT_S
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._queue.put(_STOP, timeout=min(0.1, max(0.0, deadline - time.monotonic())))
                break
            except queue.Full:
                # The writer is behind (or stuck): it sees the abandon once past the deadline.
                if time.monotonic() >= deadline:
                    break
        thread.join(max(0.0, deadline - time.monotonic()))
        if not thread.is_alive():
            return True
        self._abandon.set()
        thread.join(ABANDON_WAIT_S)
        fate = self._fate.give_up()
        if fate is None:
            return True
        waited_s = timeout_s + ABANDON_WAIT_S
        if fate == "orphaned":
            log.error("journal %s: the writer is still in a disk write %g s after the stop; left behind: it "
                      "writes nothing more when the write returns, and leaves the journal open", self.path, waited_s)
        else:
            log.error("journal %s: the writer is still closing the journal %g s after the stop (the clean stop, "
                      "the last maintenance pass or the connection's close and checkpoint); left to end on its own",
                      self.path, waited_s)
        return False

    def when_ended(self, then: Callable[[], None]) -> None:
        """Call ``then`` once the writer thread has ended: at once when it has (or never ran), else
        from that thread as its very last act (after `close` returned without it).

        The agent releases the state directory's lock so: whatever the thread's call still in
        progress writes, it writes before another agent may take the directory.
        """
        self._fate.when_ended(then)

    def _abandon_queue(self, batch: list[Frame]) -> None:
        """Count and log ``batch`` and the frames still queued as not written (the stop's deadline passed)."""
        lost = len(batch) + sum(isinstance(item, Frame) for item in drain(self._queue))
        self.frames_not_written += lost
        log.warning("journal %s: the stop's deadline passed: %d queued frames not written, and the stop is not "
                    "recorded (the next start reports this run as not stopped cleanly)", self.path, lost)

    def _open_store(self) -> tuple[JournalStore, list[UncleanRun]]:
        """Open the journal, check it and begin this run in it; the earlier runs left open."""
        check_usable(self.path)
        # The state directory is made once (the agent makes it when it starts): one that is gone
        # after it was there was removed by its owner, and a journal must not create it again. One
        # that could not be made yet (its parent missing, no permission) was never there.
        try:
            store = JournalStore(self.path, self.clock, self.retention, make_dir=self._may_make_dir)
        finally:
            self._may_make_dir = self._may_make_dir and not self.path.parent.is_dir()
        try:
            # Every page once: bad pages found now are set aside now, not met by a reader later.
            quick_check(store.conn)
            unclean = store.begin_run(self.run_id, self.node, self.started_at, self._info_json, self._config_json,
                                      self._begun_events())
        except BaseException as exc:
            store.close()
            if is_damage(exc) and not isinstance(exc, JournalDamaged):
                raise JournalDamaged(f"journal {self.path}: {exc}") from None
            raise
        self._opened = file_identity(self.path)
        return store, unclean

    def _run(self) -> None:
        try:
            self._record()
        except Exception as exc:  # noqa: BLE001 - said in the journal's status instead of a silent "ok"
            log.exception("journal writer stopped")
            self._set_status(f"the journal writer of {self.path} stopped on an unexpected error "
                             f"({str(exc).strip() or 'without a message'}: the agent's log has the details); frames "
                             "are no longer recorded until the agent restarts")
        finally:
            self._fate.end()

    def _record(self) -> None:
        store = self._open()
        next_open = time.monotonic() + 10.0
        next_maintain = time.monotonic() + 1.0
        last_commit = 0.0
        stopping = False
        batch: list[Frame] = []
        # The abandon (`close` past its deadline) is looked at between every two calls that write.
        while not stopping and not self._abandon.is_set():
            batch = []
            try:
                due = next_maintain if store is not None else next_open
                item = self._queue.get(timeout=idle_wait_s(due, MAINTAIN_EVERY_S))
            except queue.Empty:
                item = None
            # Commit at most every commit interval: gather what arrives until then.
            wait_until = last_commit + self.section.commit_interval_s
            while item is not None:
                if item is _STOP:
                    stopping = True
                    break
                assert isinstance(item, Frame)
                batch.append(item)
                remaining = wait_until - time.monotonic()
                try:
                    item = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
                except queue.Empty:
                    item = None
            if self._abandon.is_set():
                break
            if store is None and time.monotonic() >= next_open:
                store = self._open()
                next_open = time.monotonic() + 10.0
                if self._abandon.is_set():
                    break
            if batch:
                last_commit = time.monotonic()
                if store is not None and (store := self._unless_gone(store)) is None:
                    next_open = time.monotonic() + 10.0
                store = self._write(store, batch)
                batch = []
            if store is not None and not stopping and time.monotonic() >= next_maintain:
                next_maintain = time.monotonic() + MAINTAIN_EVERY_S
                if (store := self._unless_gone(store)) is None:
                    next_open = time.monotonic() + 10.0
                    continue
                store = self._maintain(store, self._may_maintain)
        # Complete: every frame queued before the stop went to `_write` (a failing journal's are
        # counted there); a deadline passed since then cost no frame.
        complete = stopping and not batch
        if not complete:
            self._abandon_queue(batch)
        self._end(store, complete)

    def _end(self, store: JournalStore | None, complete: bool) -> None:
        """The thread's last acts on ``store``: the clean stop (when ``complete``), a last maintenance
        pass and the close; or none at all, when `close` gave up on this thread first.

        The two are one decision (`WriterFate`; `close` takes its own there): the store is this
        thread's to close, or left alone, never both; and a `close` that finds the thread closing
        does not say it writes nothing more.

        The clean stop goes where readers look, as a batch does (`_unless_gone`): into a journal
        opened at once when this one was removed or replaced under the writer since its last commit.
        """
        if store is None:
            if complete:
                self._stop_events_lost()
            return
        if not self._fate.take_store():
            # `close` has returned saying this thread writes nothing more: its connection stays
            # open until the process exits (see `close`).
            self._left_open = store
            return
        try:
            if complete and self._may_write():
                # The clean stop is a commit like a batch's: a journal removed or replaced since the
                # last one would take it where nobody reads it (the next start then finds the run
                # missing, or open in the file now there). Not past the deadline: no open begins then.
                store = self._unless_gone(store)
                if store is None:
                    self._stop_events_lost()
            if complete and store is not None:
                # First the clean stop, then the maintenance: a pass that outlasts the deadline (or
                # the process, killed meanwhile) costs no frame and does not make the stop unclean.
                try:
                    store.end_run(self.run_id, self.clock.time(), self._last_events())
                except sqlite3.Error as exc:
                    log.warning("journal: cannot record the clean stop: %s", exc)
                self._maintain(store, self._may_write, last=True)
        finally:
            try:
                if store is not None:
                    store.close()
            except sqlite3.Error as exc:  # a journal found damaged past the deadline, kept as it was
                log.warning("journal %s: closing it failed: %s", self.path, exc)

    def _last_events(self) -> list[tuple[str, Event]]:
        """The events the clean stop's record carries: those kept since `hold_events`, and those of
        frames not written."""
        with self._emit_lock:
            return self._stop_events + self._unwritten_events

    def _stop_events_lost(self) -> None:
        """Log the events the clean stop's record would have carried when no journal takes it."""
        lost = len(self._last_events())
        if lost:
            log.warning("journal %s: %d events of the stop not recorded: no journal could be opened", self.path, lost)

    def _may_maintain(self) -> bool:
        """Whether a periodic maintenance pass may go on: not once a stop is asked (the frames queued
        at the stop come first; the stop's own pass follows its clean stop)."""
        return not self._stop_asked.is_set()
