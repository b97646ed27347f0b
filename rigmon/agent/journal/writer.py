"""The journal writer thread: frames from a bounded queue to the store, failures reported as events."""

from __future__ import annotations

import contextlib
import logging
import queue
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

from rigmon.agent.journal.damage import (
    JournalDamaged,
    check_usable,
    file_identity,
    gone_from_under,
    is_damage,
    quick_check,
    runs_left_open,
    set_aside,
)
from rigmon.agent.journal.fate import WriterFate
from rigmon.agent.journal.layout import JournalError, journal_path
from rigmon.agent.journal.pacing import drain, idle_wait_s
from rigmon.agent.journal.runs import UncleanRun, unclean_message
from rigmon.agent.journal.store import JournalStore
from rigmon.agent.journal.upkeep import Retention
from rigmon.clock import Clock
from rigmon.config import JournalSection
from rigmon.schema import CollectorStatus, Event, Frame, Severity

log = logging.getLogger(__name__)

#: Real seconds between maintenance passes (downsampling, retention) of the writer thread.
MAINTAIN_EVERY_S = 15.0
#: Events of frames that could not be written, kept to be written with the first frames that
#: can; beyond this many the rest are counted only.
MAX_UNWRITTEN_EVENTS = 1000

#: Seconds `JournalWriter.close` waits for the frames queued at the stop and the clean stop's record.
CLOSE_TIMEOUT_S = 10.0
#: Seconds it waits more, past that deadline, for a writer told to abandon the rest to end.
ABANDON_WAIT_S = 2.0

#: Called from the writer thread: kind, severity, subject, message, data.
EventSink = Callable[[str, Severity, str, str, dict[str, str | int | float | bool | None]], None]

_STOP = object()


class JournalWriter:
    """Writes frames to the journal from a thread of its own, so sampling never waits on disk.

    Frames go through a bounded queue; the thread commits what it has at least every
    ``commit_interval_s`` and runs maintenance (downsampling, retention) now and then.
    Failures (cannot open, disk full, I/O errors) never escape: they show in `status`
    and as ``journal_failed``/``journal_recovered`` events; frames that could not be
    written are counted (``journal_recovered`` says how many). The events of those frames
    (``journal_failed`` itself among them: it travels in the next frame, which the failing
    journal cannot take) are kept and written with the first frames that can be.

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
        self.path = journal_path(state_dir)
        self.clock = clock
        self.section = section
        self.retention = Retention.from_config(section)
        self.run_id = run_id
        self.node = node
        self.started_at = started_at
        self._info_json = info_json
        self._config_json = config_json
        self._queue: queue.Queue[object] = queue.Queue(maxsize=section.queue_frames)
        self._thread: threading.Thread | None = None
        self._sink: EventSink | None = None
        self._status = CollectorStatus(state="pending", ok=False)
        self._dropped = 0
        #: Frames not written since the status was last ok.
        self._outage_lost = 0
        self._unwritten_events: list[tuple[str, Event]] = []
        self._events_lost = 0
        self._reported_dropped = 0
        self.frames_written = 0
        #: The journal last set aside.
        self._kept: Path | None = None
        #: Frames that reached the writer but could not be written (the journal failing, or
        #: abandoned at a stop past its deadline).
        self.frames_not_written = 0
        #: Set by `close` as it begins: a periodic maintenance pass yields to the frames queued at the stop.
        self._stop_asked = threading.Event()
        #: Set by `close` past its deadline: the thread abandons the frames still queued and ends.
        self._abandon = threading.Event()
        #: The thread's end and `close`'s giving up on it, decided once (`WriterFate`).
        self._fate = WriterFate()
        #: The store an orphaned thread leaves open (see `close`).
        self._left_open: JournalStore | None = None
        #: Whether the next open may create the state directory (until it has existed).
        self._may_make_dir = True
        self._opened: tuple[int, int] | None = None  # the open journal's `file_identity`, to notice its removal

    @property
    def status(self) -> CollectorStatus:
        """Health of the journal, shown like a collector's in every frame."""
        return self._status

    def start(self, sink: EventSink | None = None) -> None:
        """Start the writer thread; ``sink`` receives events (called from that thread). A start after
        `close` is a new run: the last stop's marks (asked, abandoned, the thread's fate) are not its own.

        Raises:
            RuntimeError: the last start's thread has not ended (left in a stuck disk write by `close`).
        """
        self._fate.begin(str(self.path))
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

    def close(self, timeout_s: float | None = None) -> bool:
        """Write what is queued, record the clean stop, and end the thread.

        Within ``timeout_s`` (default `CLOSE_TIMEOUT_S`) the thread writes every frame queued before
        the stop, then records the run's clean stop, runs a last maintenance pass and closes the
        store. Past that deadline it is told to abandon: the call in progress (one batch's commit,
        or one transaction of a maintenance pass) finishes, the frames still queued are not written
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

    def _emit(self, kind: str, severity: Severity, message: str,
              data: dict[str, str | int | float | bool | None] | None = None) -> None:
        if self._sink is not None:
            try:
                self._sink(kind, severity, "journal", message, data or {})
            except Exception:  # noqa: BLE001 - reporting must not kill the writer
                log.exception("journal event sink failed")

    def _set_status(self, error: str | None, duration_s: float | None = None) -> None:
        before = self._status
        now = self.clock.time()
        if error is None:
            self._status = CollectorStatus(state="ok", ok=True, duration_s=duration_s, sampled_at=now)
            if before.state == "error":
                lost, self._outage_lost = self._outage_lost, 0
                self._emit("journal_recovered", "info",
                           f"journal {self.path} writable again; {lost} frames not recorded while it failed",
                           {"frames_not_written": lost, "frames_not_written_total": self.frames_not_written,
                            "events_not_written_total": self._events_lost})
        else:
            self._status = CollectorStatus(state="error", ok=False, error=error, duration_s=duration_s,
                                           sampled_at=now)
            if before.state != "error":
                self._emit("journal_failed", "warning", f"journal {self.path}: {error}", {"error": error})

    def _open(self) -> JournalStore | None:
        try:
            store, unclean = self._open_store()
        except (JournalError, sqlite3.Error, OSError) as exc:
            if not is_damage(exc) or not self._set_aside(str(exc)):
                self._set_status(str(exc))
                return None
            try:
                store, unclean = self._open_store()
            except (JournalError, sqlite3.Error, OSError) as again:
                self._set_status(str(again))
                return None
            # The journal set aside may hold a run that crashed (the power cut that damaged it).
            unclean = (runs_left_open(self._kept, self.run_id) if self._kept is not None else []) + unclean
        for run in unclean:
            message, data = unclean_message(run, self.started_at)
            self._emit("unclean_shutdown", "warning", message, data)
        self._set_status(None)
        return store

    def _open_store(self) -> tuple[JournalStore, list[UncleanRun]]:
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
            unclean = store.begin_run(self.run_id, self.node, self.started_at, self._info_json, self._config_json)
        except BaseException as exc:
            store.close()
            if is_damage(exc) and not isinstance(exc, JournalDamaged):
                raise JournalDamaged(f"journal {self.path}: {exc}") from None
            raise
        self._opened = file_identity(self.path)
        return store, unclean

    def _set_aside(self, error: str) -> bool:
        """Move a damaged journal out of the way (kept), report it; whether a new one can be started."""
        self._kept = None
        try:
            kept = set_aside(self.path, self.clock.time())
        except OSError as exc:
            log.warning("journal %s cannot be used (%s) and cannot be set aside: %s", self.path, error, exc)
            return False
        self._kept = kept
        log.warning("journal %s cannot be used (%s); kept as %s, recording into a new journal", self.path, error, kept)
        self._emit("journal_set_aside", "warning",
                   f"journal could not be used ({error}); kept as {kept.name}, recording into a new journal",
                   {"error": error, "kept_as": str(kept)})
        return True

    def _replace_damaged(self, store: JournalStore, error: str) -> JournalStore | None:
        """``store`` turned out damaged while running: close it, set it aside, open a new one; not past
        the stop's deadline (no other write begins then: the next start finds the damage again)."""
        if not self._may_write():
            self._set_status(error)
            return store
        try:
            store.close()
        except sqlite3.Error:
            pass
        if not self._set_aside(error):
            self._set_status(error)
            return None
        return self._open()

    def _run(self) -> None:
        try:
            self._record()
        except Exception as exc:  # noqa: BLE001 - said in the journal's status instead of a silent "ok"
            log.exception("journal writer stopped")
            self._set_status(f"journal writer stopped ({type(exc).__name__}: {exc}); frames are no longer "
                             "recorded until the agent restarts")
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
        """
        if store is None:
            return
        if not self._fate.take_store():
            # `close` has returned saying this thread writes nothing more: its connection stays
            # open until the process exits (see `close`).
            self._left_open = store
            return
        try:
            if complete:
                # First the clean stop, then the maintenance: a pass that outlasts the deadline (or
                # the process, killed meanwhile) costs no frame and does not make the stop unclean.
                try:
                    store.end_run(self.run_id, self.clock.time())
                except sqlite3.Error as exc:
                    log.warning("journal: cannot record the clean stop: %s", exc)
                self._maintain(store, self._may_write, last=True)
        finally:
            try:
                store.close()
            except sqlite3.Error as exc:  # a journal found damaged past the deadline, kept as it was
                log.warning("journal %s: closing it failed: %s", self.path, exc)

    def _unless_gone(self, store: JournalStore) -> JournalStore | None:
        """``store``, or, when its file was removed or replaced under it, a journal opened at once where
        it belongs (``None`` when none can be: the frames count as not recorded until one can).

        SQLite writes on into a removed file, which nobody can read, and says nothing: one ``stat`` of
        the path before each batch (not each frame) finds it before a frame goes there.
        """
        gone = gone_from_under(self.path, self._opened)
        if gone is None:
            return store
        with contextlib.suppress(sqlite3.Error):
            store.close()
        self._set_status(gone)
        return self._open()

    def _may_write(self) -> bool:
        """Whether the thread may begin another write: not once past the stop's deadline."""
        return not self._abandon.is_set()

    def _may_maintain(self) -> bool:
        """Whether a periodic maintenance pass may go on: not once a stop is asked (the frames queued
        at the stop come first; the stop's own pass follows its clean stop)."""
        return not self._stop_asked.is_set()

    def _write(self, store: JournalStore | None, batch: list[Frame]) -> JournalStore | None:
        """Write ``batch``; returns the store to go on with (a new one when this one was damaged)."""
        if store is None:
            self._lose(batch)
            return None
        t0 = time.monotonic()
        try:
            store.write(batch, self._unwritten_events)
        except (sqlite3.Error, OSError) as exc:
            self._lose(batch)
            if is_damage(exc):
                return self._replace_damaged(store, str(exc))
            self._set_status(f"{exc}; {self.frames_not_written} frames not recorded")
            if isinstance(exc, sqlite3.OperationalError) and "full" in str(exc):
                # Give retention a chance to make room before the next batch (the stop's too).
                return self._maintain(store, self._may_write)
            return store
        except Exception as exc:  # noqa: BLE001 - a frame that cannot be stored must not stop the recorder
            # A frame that does not encode (a NaN a collector let through): those frames are lost,
            # said so in the journal's status, and the next ones are written.
            self._lose(batch)
            if self._status.state != "error":
                log.exception("journal: %d frame(s) cannot be written", len(batch))
            self._set_status(f"frames cannot be written: {exc}; {self.frames_not_written} frames not recorded")
            return store
        self.frames_written += len(batch)
        self._unwritten_events.clear()
        dropped = self._dropped
        if dropped != self._reported_dropped:
            self._emit("journal_dropped", "warning",
                       f"journal writer fell behind: {dropped - self._reported_dropped} frames not recorded",
                       {"dropped_total": dropped})
            self._reported_dropped = dropped
        self._set_status(None, round(time.monotonic() - t0, 6))
        return store

    def _lose(self, batch: list[Frame]) -> None:
        """Count frames that cannot be written and keep their events for a later write."""
        self.frames_not_written += len(batch)
        self._outage_lost += len(batch)
        for frame in batch:
            for event in frame.events:
                if len(self._unwritten_events) < MAX_UNWRITTEN_EVENTS:
                    self._unwritten_events.append((frame.run_id, event))
                else:
                    self._events_lost += 1

    def _maintain(self, store: JournalStore, go_on: Callable[[], bool], last: bool = False) -> JournalStore | None:
        """One maintenance pass, cut short between two of its transactions once ``go_on`` says no.

        Returns:
            the store to go on with: a new one when this one was found damaged, unless ``last``
            (the stop's pass, after the clean stop: the next start finds the damage again).
        """
        try:
            store.maintain(go_on)
        except (sqlite3.Error, OSError, JournalError, zlib.error, ValueError) as exc:
            # zlib and JSON errors: a stored body that does not decode (damage inside a valid page).
            if is_damage(exc) and not last:
                return self._replace_damaged(store, f"maintenance failed: {exc}")
            self._set_status(f"maintenance failed: {exc}")
        return store
