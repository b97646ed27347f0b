"""The journal writer's store and its failures: opened, written and maintained; a journal damaged,
removed or replaced under the writer set aside or followed; failures shown in the writer's status
and events, and the frames that could not be written counted (their events kept for later).

Events go out through the agent's sampler, in its next frame, which the journal then records. At
the stop no frame follows: from `WriterRecovery.hold_events` on, the writer keeps its events and
writes them with the clean stop's record (`JournalStore.end_run`). A journal begun afresh (the file
set aside, removed or replaced under the writer) says why in its first commit: a ``journal_begun``
event written with the run's start record (`JournalStore.begin_run`).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from pathlib import Path

from rigmon.agent.journal.damage import (
    gone_from_under,
    is_damage,
    runs_left_open,
    set_aside,
)
from rigmon.agent.journal.layout import JournalError, journal_path
from rigmon.agent.journal.runs import UncleanRun, unclean_message
from rigmon.agent.journal.store import JournalStore
from rigmon.agent.journal.upkeep import Retention
from rigmon.clock import Clock
from rigmon.config import JournalSection
from rigmon.schema import CollectorStatus, Event, Frame, Severity

EventData = dict[str, str | int | float | bool | None]

log = logging.getLogger(__name__)

#: Events of frames that could not be written, kept to be written with the first frames that
#: can; beyond this many the rest are counted only.
MAX_UNWRITTEN_EVENTS = 1000

#: Called from the writer thread: kind, severity, subject, message, data.
EventSink = Callable[[str, Severity, str, str, EventData], None]


class WriterRecovery(ABC):
    """What `rigmon.agent.journal.writer.JournalWriter` does with its store, on its thread: open it
    (`_open`), write a batch (`_write`), maintain it (`_maintain`), and recover when it fails.

    Failures never escape: they show in `status` and as events; a damaged journal is set aside and a
    new one started; one removed or replaced under the writer is noticed before the next commit.
    How the store is opened (`_open_store`) is the writer's.

    Args: those of `JournalWriter`.
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
        self._sink: EventSink | None = None
        self._status = CollectorStatus(state="pending", ok=False)
        #: Frames the full queue dropped (counted by `JournalWriter.submit`).
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
        #: Set by `JournalWriter.close` past its deadline: no other write begins; the thread abandons
        #: the frames still queued and ends.
        self._abandon = threading.Event()
        #: Whether the next open may create the state directory (until it has existed).
        self._may_make_dir = True
        self._opened: tuple[int, int] | None = None  # the open journal's `file_identity`, to notice its removal
        #: Events the writer made itself (ids ``<run_id>-journal-<n>``): those it keeps and ``journal_begun``.
        self._event_n = 0
        #: Taken by `_emit` and `hold_events`: an event goes to the sink, or is kept, never both nor neither.
        self._emit_lock = threading.RLock()
        #: Set by `hold_events`: no frame follows, events are kept for the clean stop's record.
        self._holding = False
        #: Events that go with the clean stop's record: the agent's last ones, handed to `close`, and
        #: the writer's own since `hold_events`.
        self._stop_events: list[tuple[str, Event]] = []
        #: Why the next journal opened is not the one written so far (set aside, removed, replaced):
        #: the ``journal_begun`` event its first commit records.
        self._begun: Event | None = None

    @property
    def status(self) -> CollectorStatus:
        """Health of the journal, shown like a collector's in every frame."""
        return self._status

    @abstractmethod
    def _open_store(self) -> tuple[JournalStore, list[UncleanRun]]:
        """Open the journal, check it and begin this run in it; the earlier runs left open.

        Raises:
            JournalError, sqlite3.Error, OSError: it cannot be opened (`JournalDamaged`: set it aside).
        """

    def hold_events(self) -> None:
        """From now on keep the writer's events for the clean stop's record instead of handing them to
        the sink: the agent's sampler has stopped, and no frame will carry them.

        Every event handed to the sink before this returns has been handed whole (the agent then takes
        the sampler's last events, those among them: see `rigmon.agent.agent.Agent`'s stop).
        """
        with self._emit_lock:
            self._holding = True

    def _release_events(self) -> None:
        """A new start: events go to the sink again; none kept from the last stop."""
        with self._emit_lock:
            self._holding = False
            self._stop_events = []

    def _keep_for_stop(self, events: Iterable[Event]) -> None:
        """Keep ``events`` (the agent's last, not carried by any frame) for the clean stop's record."""
        with self._emit_lock:
            self._stop_events += [(self.run_id, event) for event in events]

    def _event(self, kind: str, severity: Severity, message: str, data: EventData) -> Event:
        """An event of the writer's own making (not the sampler's: it goes into the journal only)."""
        self._event_n += 1
        return Event(id=f"{self.run_id}-journal-{self._event_n}", at=self.clock.time(), kind=kind,
                     severity=severity, subject="journal", message=message, data=data)

    def _emit(self, kind: str, severity: Severity, message: str, data: EventData | None = None) -> None:
        with self._emit_lock:
            if self._holding:
                self._stop_events.append((self.run_id, self._event(kind, severity, message, dict(data or {}))))
                return
            if self._sink is not None:
                try:
                    self._sink(kind, severity, "journal", message, data or {})
                except Exception:  # noqa: BLE001 - reporting must not kill the writer
                    log.exception("journal event sink failed")

    def _begin_afresh(self, reason: str, message: str, error: str, kept_as: str | None = None) -> None:
        """Say in the next journal opened why it is not the one written so far.

        Args:
            reason: ``set_aside``, ``removed`` or ``replaced``.
            message: the sentence's end, after the time it was noticed.
            error: what the writer found (its status then).
            kept_as: where a journal set aside was kept.
        """
        now = self.clock.time()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(now))
        self._begun = self._event("journal_begun", "warning", f"journal begun afresh at {stamp} UTC: {message}",
                                  {"reason": reason, "noticed_at": now, "error": error, "kept_as": kept_as})

    def _begun_events(self) -> list[tuple[str, Event]]:
        """What a journal opened now records first: why it was begun afresh, when it was (see `_begin_afresh`)."""
        return [] if self._begun is None else [(self.run_id, self._begun)]

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
        # Recorded with the run's start in the journal just opened (see `_open_store`).
        self._begun = None
        for run in unclean:
            message, data = unclean_message(run, self.started_at)
            self._emit("unclean_shutdown", "warning", message, data)
        self._set_status(None)
        return store

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
        self._begin_afresh("set_aside", f"the journal written before could not be used ({error}) and was kept "
                           f"as {kept.name}; what it holds is not in this file", error, str(kept))
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
        if self.path.exists():
            self._begin_afresh("replaced", "the journal file this agent wrote was replaced while it ran; it records "
                               "into the file now there from here on", gone)
        elif not self.path.parent.is_dir():
            self._begin_afresh("removed", "the state directory was removed while the agent ran, with the journal "
                               "written before; what it held is not in this file", gone)
        else:
            self._begin_afresh("removed", "the journal file written before was removed while the agent ran; what it "
                               "held is not in this file", gone)
        return self._open()

    def _may_write(self) -> bool:
        """Whether the thread may begin another write: not once past the stop's deadline."""
        return not self._abandon.is_set()

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
