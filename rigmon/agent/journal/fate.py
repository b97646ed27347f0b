"""Who has the journal's store at its writer thread's end: the thread, or nobody (left behind by a stop).

`rigmon.agent.journal.writer.JournalWriter.close` waits for the writer thread and, past its
deadlines, gives up on it; the thread, at its end, closes the store. Both look at one `WriterFate`
under its lock, so exactly one of them decides: the thread takes the store (the clean stop, the
last maintenance pass, the close) and `close` knows it is still closing; or `close` leaves the
thread behind first, and the thread, when its stuck call returns, touches the store no more.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Literal

log = logging.getLogger(__name__)

#: ``running``: the thread writes; ``closing``: it took the store at its end; ``orphaned``: `close`
#: gave up on it first, and it leaves the store as it is.
Fate = Literal["running", "closing", "orphaned"]


class WriterFate:
    """The end of one writer thread after another (a writer may be started again after its close)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fate: Fate = "running"
        #: Whether no thread runs (none started yet, or it has ended: it writes nothing more).
        self._ended = True
        #: Called by the thread as its last act (see `when_ended`).
        self._when_ended: list[Callable[[], None]] = []

    @property
    def ended(self) -> bool:
        """Whether no writer thread runs."""
        return self._ended

    def begin(self, what: str) -> None:
        """A thread starts (``what`` names the journal, for the error).

        Raises:
            RuntimeError: the last thread has not ended (left behind in a stuck disk write).
        """
        with self._lock:
            if not self._ended:
                raise RuntimeError(f"journal {what}: the writer thread of the last start has not ended")
            self._ended, self._fate = False, "running"

    def give_up(self) -> Fate | None:
        """`close`'s decision, past its deadlines: ``None`` when the thread has ended meanwhile, else
        ``orphaned`` (left behind: it writes nothing more once its call returns) or ``closing`` (it
        took the store first and closes it on its own)."""
        with self._lock:
            if self._ended:
                return None
            if self._fate == "running":
                self._fate = "orphaned"
            return self._fate

    def take_store(self) -> bool:
        """The thread's decision at its end: whether the store is its to close (not when orphaned)."""
        with self._lock:
            if self._fate == "orphaned":
                return False
            self._fate = "closing"
            return True

    def end(self) -> None:
        """The thread's very last act: it has ended; the calls of `when_ended` run now, on it."""
        with self._lock:
            self._ended = True
            then, self._when_ended = self._when_ended, []
        for call in then:
            try:
                call()
            except Exception:  # noqa: BLE001 - the thread's end is no place to raise
                log.exception("journal: a call at the writer's end failed")

    def when_ended(self, then: Callable[[], None]) -> None:
        """Call ``then`` once the thread has ended: at once when it has (or never ran), else from
        that thread as its very last act."""
        with self._lock:
            if not self._ended:
                self._when_ended.append(then)
                return
        then()
