"""Notifier workers: one thread and one bounded queue per ``[[notify]]``, with retries,
de-duplication and a rate limit, so sending never blocks the agent's sampler.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rigmon.config import NotifySection
from rigmon.notify.payload import Notification
from rigmon.notify.senders import NotifyError, Sender, make_sender
from rigmon.schema import CollectorStatus

log = logging.getLogger(__name__)

_SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}
#: Alarm ids remembered as "firing not sent", so their resolution is not sent either (bounded).
_UNSENT_MEMORY = 10000


@dataclass(eq=False)
class _Job:
    """One notification on its way: its attempts so far and when the next one is due."""

    n: Notification
    key: tuple[str, str, str]
    seq: int
    rank: int
    attempt: int = 0
    due: float = 0.0
    delay_s: float = 0.0
    #: A firing held by de-duplication whose window ended: sent without a second check.
    released: bool = False
    dropped: bool = False


class NotifierWorker:
    """One notifier: a bounded set of pending notifications sent by its own thread.

    `submit` never blocks. The thread tries new notifications before retries (criticals
    first, then in arrival order) and retries failures with exponential backoff *by time*: a
    failed notification waits for its retry without holding up the others, so a critical is
    not kept behind a warning's retries to a dead receiver (it waits at most for the one
    attempt in progress, ``timeout_s``).
    Notifications of one alarm key (node, rule, and the alarm's identity: its subject unless
    its rule keeps it by another, `Alarm.identity`) stay in order: a resolution is never sent
    before its firing, nor the next episode before the last one's resolution, also when the
    subject changed between them (an md array renumbered by a reboot).

    At most ``queue_size`` notifications are pending (in retry or not yet sent); beyond
    that the oldest of the lowest severity is dropped, so a burst of warnings cannot push
    out a critical. Whatever is lost (dropped, rate-limited, failed after its retries) is
    counted in the next notification sent (``suppressed``).

    De-duplication damps flapping: a rule firing again on the same key within
    ``dedup_s`` of the last firing sent is held until that window ends, then sent if it
    is still firing; if it resolves meanwhile, neither its firing nor its resolution is sent.

    Args:
        section: the ``[[notify]]`` settings.
        name: name in logs.
        sender: delivers one notification (default: by kind).
        monotonic: clock for retries, de-duplication and the rate limit.
    """

    def __init__(self, section: NotifySection, name: str, sender: Sender | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.section = section
        self.name = name
        self._sender_factory: Callable[[], Sender] = (lambda: sender) if sender else (lambda: make_sender(section))
        self._monotonic = monotonic
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._wake = threading.Condition()
        # Everything below is guarded by _wake.
        self._seq = 0
        #: Pending jobs by severity rank, oldest first (the job in flight stays in until done).
        self._pending: tuple[collections.OrderedDict[int, _Job], ...] = tuple(
            collections.OrderedDict() for _ in _SEVERITY_RANK)
        #: Per alarm key, its pending jobs in order: only the first may be attempted.
        self._lanes: dict[tuple[str, str, str], collections.deque[_Job]] = {}
        #: Jobs at the head of their lane not yet attempted, by (-rank, seq).
        self._fresh: list[tuple[int, int, _Job]] = []
        #: Jobs waiting for a retry, by (due, seq).
        self._retry: list[tuple[float, int, _Job]] = []
        self._inflight: _Job | None = None
        #: Ids of firings the receiver never got (dropped, rate-limited, failed): their
        #: resolution is not sent. Any other resolution is, also of an alarm whose firing was
        #: sent before the agent restarted.
        self._unsent: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._suppressed = 0
        # Worker thread only.
        self._last_fired: dict[tuple[str, str, str], float] = {}
        self._deferred: dict[tuple[str, str, str], Notification] = {}
        self._sent_times: collections.deque[float] = collections.deque()
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self.deduplicated = 0
        #: Why the last attempt failed, while the receiver fails (``None`` once one gets through).
        self.failing: str | None = None

    def wants(self, n: Notification) -> bool:
        """Whether this notifier sends ``n`` at all (severity and resolved filters)."""
        if n.status == "resolved" and not self.section.send_resolved:
            return False
        return _SEVERITY_RANK[n.alarm.severity] >= _SEVERITY_RANK[self.section.min_severity]

    def submit(self, n: Notification) -> None:
        """Queue ``n`` without blocking (when full, drops the oldest of the lowest severity)."""
        if not self.wants(n):
            return
        a = n.alarm
        with self._wake:
            self._seq += 1
            # By identity: an alarm whose subject changes mid-episode (md127 renumbered md126) keeps one lane.
            self._enqueue(_Job(n, (a.node, a.rule, a.identity or a.subject), self._seq, _SEVERITY_RANK[a.severity]))
            self._wake.notify()

    def start(self) -> None:
        """Start the worker thread (once)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name=f"rigmon-notify-{self.name}", daemon=True)
        self._thread.start()

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop after a last attempt at what is pending (no more retry waits); say what is
        left unsent when that does not finish within ``timeout_s`` (a hung receiver)."""
        self._stop.set()
        with self._wake:
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout_s)
        with self._wake:
            left = sum(len(p) for p in self._pending)
        if left:
            log.warning("notifier %s: stopping with %d notification(s) not sent", self.name, left)

    def idle(self) -> bool:
        """Nothing pending, in retry or being sent (tests and benchmarks wait for this)."""
        with self._wake:
            return not any(self._pending)

    # --- the pending set (callers hold _wake) ----------------------------------------------

    def _enqueue(self, job: _Job, first: bool = False) -> None:
        self._pending[job.rank][job.seq] = job
        lane = self._lanes.setdefault(job.key, collections.deque())
        if not first:
            lane.append(job)
        elif lane and (lane[0].attempt or lane[0] is self._inflight):
            lane.insert(1, job)  # the head has been attempted: it stays first
        else:
            lane.appendleft(job)
        if lane[0] is job:
            heapq.heappush(self._fresh, (-job.rank, job.seq, job))
        limit = self.section.queue_size
        while self._count() > limit:
            self._drop_one()
        if len(self._fresh) > 2 * limit + 64:
            # Entries of dropped jobs wait in the heaps until popped; do not let them pile up
            # while the thread is stuck in a send.
            self._fresh = [e for e in self._fresh if not e[2].dropped]
            heapq.heapify(self._fresh)
            self._retry = [e for e in self._retry if not e[2].dropped]
            heapq.heapify(self._retry)

    def _count(self) -> int:
        """Pending jobs, not counting the one being sent."""
        busy = self._inflight
        return sum(len(p) for p in self._pending) - (busy is not None and busy.seq in self._pending[busy.rank])

    def _drop_one(self) -> None:
        for pending in self._pending:
            victim = next((j for j in itertools.islice(pending.values(), 2) if j is not self._inflight), None)
            if victim is not None:
                break
        else:
            return
        victim.dropped = True
        self.dropped += 1
        self._suppressed += 1
        if victim.n.status == "firing":
            self._mark_unsent(victim.n.alarm.id)
        self._remove(victim)

    def _remove(self, job: _Job) -> None:
        """Take a job out (sent, given up or dropped); the next of its lane may go."""
        del self._pending[job.rank][job.seq]
        lane = self._lanes[job.key]
        was_head = lane[0] is job
        lane.remove(job)
        if not lane:
            del self._lanes[job.key]
        elif was_head:
            nxt = lane[0]
            heapq.heappush(self._fresh, (-nxt.rank, nxt.seq, nxt))

    def _mark_unsent(self, alarm_id: str) -> None:
        self._unsent[alarm_id] = None
        while len(self._unsent) > _UNSENT_MEMORY:
            self._unsent.popitem(last=False)

    def _next(self, now: float) -> _Job | None:
        """The job to attempt now: new notifications first (critical first), then due retries."""
        while self._fresh:
            _, _, job = self._fresh[0]
            lane = self._lanes.get(job.key)
            if job.dropped or job.attempt or lane is None or lane[0] is not job:
                heapq.heappop(self._fresh)
                continue
            heapq.heappop(self._fresh)
            return job
        while self._retry:
            due, _, job = self._retry[0]
            if job.dropped or due != job.due:
                heapq.heappop(self._retry)
                continue
            if due <= now or self._stop.is_set():
                heapq.heappop(self._retry)
                return job
            break
        return None

    # --- the worker thread -----------------------------------------------------------------

    def _run(self) -> None:
        sender = self._sender_factory()
        try:
            while True:
                with self._wake:
                    now = self._monotonic()
                    self._release_deferred(now)
                    job = self._next(now)
                    if job is None:
                        if self._stop.is_set():
                            return
                        wait_s = 0.1
                        if self._retry:
                            wait_s = min(wait_s, max(0.0, self._retry[0][0] - now))
                        self._wake.wait(wait_s)
                        continue
                    self._inflight = job
                try:
                    self._attempt(sender, job)
                except Exception:  # noqa: BLE001 - a notifier bug must not kill the thread
                    log.exception("notifier %s failed on %s", self.name, job.n.alarm.id)
                    with self._wake:
                        if job.seq in self._pending[job.rank]:
                            self._remove(job)
                finally:
                    with self._wake:
                        self._inflight = None
        finally:
            sender.close()

    def _release_deferred(self, now: float) -> None:
        """Held firings whose de-duplication window ended go first in their lane."""
        for key, n in list(self._deferred.items()):
            if now - self._last_fired.get(key, now) >= self.section.dedup_s:
                del self._deferred[key]
                self._seq += 1
                self._enqueue(_Job(n, key, self._seq, _SEVERITY_RANK[n.alarm.severity], released=True), first=True)

    def _attempt(self, sender: Sender, job: _Job) -> None:
        key = job.key
        if job.attempt == 0:
            with self._wake:
                first = self._first_attempt(job, self._monotonic())
            if first is None:
                return
            job.n = first
        n = job.n
        try:
            sender.send(n)
        except NotifyError as exc:
            self._failed(job, exc)
            return
        except Exception as exc:  # noqa: BLE001 - any failure of a sender is a failed delivery
            log.exception("notifier %s: %s %s: the sender failed", self.name, n.status, n.alarm.id)
            self._failed(job, NotifyError(f"{type(exc).__name__}: {exc}", permanent=True))
            return
        now = self._monotonic()
        self._sent_times.append(now)
        self.sent += 1
        self.failing = None
        if n.status == "firing":
            self._last_fired[key] = now
        with self._wake:
            self._remove(job)

    def _first_attempt(self, job: _Job, now: float) -> Notification | None:
        """De-duplication and the rate limit, before a notification's first attempt: the
        notification to send (with the count of those lost since the last one sent), or
        ``None`` when there is nothing to send."""
        n, key, a = job.n, job.key, job.n.alarm
        if n.status == "resolved":
            held = self._deferred.get(key)
            if held is not None and held.alarm.id == a.id:
                # It fired and resolved within the de-duplication window: the receiver
                # still has the previous firing's resolution, so there is nothing to say.
                del self._deferred[key]
                self._remove(job)
                return None
            if a.id in self._unsent:
                del self._unsent[a.id]  # the receiver never saw it fire
                self._remove(job)
                return None
        elif not job.released:
            last = self._last_fired.get(key)
            if last is not None and now - last < self.section.dedup_s:
                # Flapping: hold the new firing until the window ends; it is sent then
                # if it has not resolved meanwhile.
                self.deduplicated += 1
                self._deferred[key] = n
                self._remove(job)
                return None
        while self._sent_times and self._sent_times[0] <= now - 60.0:
            self._sent_times.popleft()
        if len(self._sent_times) >= self.section.max_per_minute:
            self._suppressed += 1
            if n.status == "firing":
                self._mark_unsent(a.id)
            log.warning("notifier %s: rate limit (%d/min) reached, dropped %s %s", self.name,
                        self.section.max_per_minute, n.status, a.id)
            self._remove(job)
            return None
        suppressed, self._suppressed = self._suppressed, 0
        return Notification(n.status, a, suppressed) if suppressed else n

    def _failed(self, job: _Job, exc: NotifyError) -> None:
        n = job.n
        last_try = exc.permanent or job.attempt >= self.section.retries or self._stop.is_set()
        delay_s = job.delay_s or self.section.backoff_s
        if exc.retry_after_s is not None:
            # The receiver said when (429, 503): wait that long, within backoff_max_s.
            delay_s = min(self.section.backoff_max_s, max(delay_s, exc.retry_after_s))
        log.warning("notifier %s: %s %s attempt %d failed: %s%s", self.name, n.status, n.alarm.id,
                    job.attempt + 1, exc, "" if last_try else f"; retry in {delay_s:.1f} s")
        # Into every frame (``collectors.notify``): the dashboard, the journal and bug-report bundles
        # carry it, and a receiver's secret (a redirect's Location, a URL a command printed, a token in
        # an answer's body or a command's output) must not go with it; the log above keeps it whole,
        # for the operator to fix the url. The sender redacted what it quoted before cutting it.
        self.failing = exc.redacted
        with self._wake:
            if job.dropped:
                return  # pushed out of the pending set while it was being sent
            if last_try:
                self.failed += 1
                # The receiver got neither this one nor those it was to count.
                self._suppressed += n.suppressed + 1
                if n.status == "firing":
                    self._mark_unsent(n.alarm.id)
                self._remove(job)
                return
            job.attempt += 1
            job.due = self._monotonic() + delay_s
            job.delay_s = min(self.section.backoff_max_s, delay_s * 2)
            heapq.heappush(self._retry, (job.due, job.seq, job))


class Notifiers:
    """Every configured notifier; `submit` hands a notification to each without blocking."""

    def __init__(self, sections: Sequence[NotifySection], senders: Sequence[Sender] | None = None) -> None:
        self.workers = [
            NotifierWorker(s, s.name or f"{s.kind}-{i + 1}", senders[i] if senders else None)
            for i, s in enumerate(sections)
        ]

    def start(self) -> None:
        """Start every worker thread."""
        for w in self.workers:
            w.start()

    def submit(self, n: Notification) -> None:
        """Queue ``n`` on every notifier that wants it."""
        for w in self.workers:
            w.submit(n)

    def idle(self) -> bool:
        """Every queue is drained."""
        return all(w.idle() for w in self.workers)

    def status(self) -> CollectorStatus:
        """The notifiers' health in every frame (``collectors.notify``): an error while a receiver
        fails, naming it, why, and how many notifications it lost; ok once one gets through."""
        failing = [f"{w.name}: {w.failing}" + (f" ({w.failed} lost)" if w.failed else "")
                   for w in self.workers if w.failing is not None]
        if failing:
            return CollectorStatus(state="error", ok=False, error="; ".join(failing))
        return CollectorStatus(state="ok", ok=True)

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop every worker."""
        for w in self.workers:
            w._stop.set()
        for w in self.workers:
            w.close(timeout_s)
