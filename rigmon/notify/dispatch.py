"""Notifier workers: one thread and one bounded queue per ``[[notify]]``, with retries,
de-duplication and a rate limit, so sending never blocks the agent's sampler.
"""

from __future__ import annotations

import collections
import logging
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from rigmon.config import NotifySection
from rigmon.notify.payload import (
    Notification,
    command_environment,
    discord_payload,
    ntfy_request,
    slack_payload,
    webhook_payload,
)

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

_SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}
#: Alarm ids remembered as "firing sent", so their resolution is sent too (bounded).
_SENT_MEMORY = 10000
#: HTTP statuses worth retrying among the 4xx: timeout and rate limiting.
_RETRYABLE_4XX = {408, 425, 429}


class NotifyError(Exception):
    """Delivery failed; ``permanent`` when retrying cannot help (a 4xx answer)."""

    def __init__(self, message: str, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class Sender(Protocol):
    """Delivers one notification or raises `NotifyError`."""

    def send(self, n: Notification) -> None: ...

    def close(self) -> None: ...


class HttpSender:
    """POSTs a notification with httpx (webhook, ntfy, Slack, Discord)."""

    def __init__(self, section: NotifySection) -> None:
        # Deferred import: importing httpx also imports its command-line tool (rich,
        # pygments), which the agent side must not load unless an HTTP notifier is
        # configured (tests/test_architecture.py).
        import httpx

        self._httpx = httpx
        self.section = section
        self._client: httpx.Client = httpx.Client(timeout=section.timeout_s, headers=dict(section.headers),
                                    follow_redirects=False)

    def send(self, n: Notification) -> None:
        kind = self.section.kind
        try:
            if kind == "ntfy":
                body, headers = ntfy_request(n)
                response = self._client.post(self.section.url, content=body, headers=headers)
            else:
                payload = (slack_payload(n) if kind == "slack" else discord_payload(n) if kind == "discord"
                           else webhook_payload(n))
                response = self._client.post(self.section.url, json=payload)
        except self._httpx.HTTPError as exc:
            raise NotifyError(f"{type(exc).__name__}: {exc}") from None
        if response.is_success:
            return
        permanent = 400 <= response.status_code < 500 and response.status_code not in _RETRYABLE_4XX
        raise NotifyError(f"HTTP {response.status_code}: {response.text[:200]}", permanent=permanent)

    def close(self) -> None:
        self._client.close()


class CommandSender:
    """Runs a command (argument list, no shell) with the alarm in ``RIGMON_ALARM_*`` variables."""

    def __init__(self, section: NotifySection) -> None:
        self.section = section

    def send(self, n: Notification) -> None:
        env = {**os.environ, **command_environment(n)}
        try:
            done = subprocess.run(list(self.section.command), env=env, stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=self.section.timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise NotifyError(f"command timed out after {self.section.timeout_s} s") from None
        except OSError as exc:
            raise NotifyError(f"cannot run {self.section.command[0]}: {exc.strerror}", permanent=True) from None
        if done.returncode != 0:
            err = done.stderr.decode("utf-8", "replace").strip()[-200:]
            raise NotifyError(f"command exited {done.returncode}: {err}")

    def close(self) -> None:
        """Nothing held between runs."""


def make_sender(section: NotifySection) -> Sender:
    """The sender for a notifier's kind."""
    if section.kind == "command":
        return CommandSender(section)
    return HttpSender(section)


class NotifierWorker:
    """One notifier: a bounded queue drained by its own thread.

    `submit` never blocks: when the queue is full the oldest notification is dropped and
    counted. The thread de-duplicates, applies the rate limit, and retries failures with exponential backoff.

    De-duplication damps flapping: a rule firing again on the same subject within
    ``dedup_s`` of the last firing sent is held until that window ends, then sent if it
    is still firing; if it resolves meanwhile, neither its firing nor its resolution is sent.

    Args:
        section: the ``[[notify]]`` settings.
        name: name in logs.
        sender: delivers one notification (default: by kind).
        monotonic: clock for de-duplication and the rate limit.
    """

    def __init__(self, section: NotifySection, name: str, sender: Sender | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.section = section
        self.name = name
        self._sender_factory: Callable[[], Sender] = (lambda: sender) if sender else (lambda: make_sender(section))
        self._monotonic = monotonic
        self._queue: queue.Queue[Notification] = queue.Queue(maxsize=section.queue_size)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._sent_firing: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._last_fired: dict[tuple[str, str, str], float] = {}
        self._deferred: dict[tuple[str, str, str], Notification] = {}
        self._sent_times: collections.deque[float] = collections.deque()
        self._suppressed = 0
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self.deduplicated = 0

    def wants(self, n: Notification) -> bool:
        """Whether this notifier sends ``n`` at all (severity and resolved filters)."""
        if n.status == "resolved" and not self.section.send_resolved:
            return False
        return _SEVERITY_RANK[n.alarm.severity] >= _SEVERITY_RANK[self.section.min_severity]

    def submit(self, n: Notification) -> None:
        """Queue ``n`` without blocking (drops the oldest when full)."""
        if not self.wants(n):
            return
        while True:
            try:
                self._queue.put_nowait(n)
                return
            except queue.Full:
                try:
                    self._queue.get_nowait()
                    with self._lock:
                        self.dropped += 1
                        self._suppressed += 1
                except queue.Empty:
                    pass

    def start(self) -> None:
        """Start the worker thread (once)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name=f"rigmon-notify-{self.name}", daemon=True)
        self._thread.start()

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop after a last attempt at what is queued (no more retry waits)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def idle(self) -> bool:
        """Nothing queued or being sent (tests and benchmarks wait for this)."""
        return self._queue.unfinished_tasks == 0

    def _run(self) -> None:
        sender = self._sender_factory()
        try:
            while True:
                try:
                    n = self._queue.get(timeout=0.1)
                except queue.Empty:
                    if self._stop.is_set():
                        return
                    self._release_deferred(sender)
                    continue
                try:
                    self._handle(sender, n)
                    self._release_deferred(sender)
                except Exception:  # noqa: BLE001 - a notifier bug must not kill the thread
                    log.exception("notifier %s failed on %s", self.name, n.alarm.id)
                finally:
                    self._queue.task_done()
        finally:
            sender.close()

    def _handle(self, sender: Sender, n: Notification) -> None:
        a = n.alarm
        key = (a.node, a.rule, a.subject)
        now = self._monotonic()
        if n.status == "resolved":
            held = self._deferred.get(key)
            if held is not None and held.alarm.id == a.id:
                # It fired and resolved within the de-duplication window: the receiver
                # still has the previous firing's resolution, so there is nothing to say.
                del self._deferred[key]
                return
            if a.id not in self._sent_firing:
                return  # its firing was dropped: the receiver never saw it
            del self._sent_firing[a.id]
        else:
            last = self._last_fired.get(key)
            if last is not None and now - last < self.section.dedup_s:
                # Flapping: hold the new firing until the window ends; it is sent then
                # if it has not resolved meanwhile.
                self.deduplicated += 1
                self._deferred[key] = n
                return
        self._send(sender, n, key, now)

    def _release_deferred(self, sender: Sender) -> None:
        if not self._deferred:
            return
        now = self._monotonic()
        for key, n in list(self._deferred.items()):
            if now - self._last_fired.get(key, now) >= self.section.dedup_s:
                del self._deferred[key]
                self._send(sender, n, key, now)

    def _send(self, sender: Sender, n: Notification, key: tuple[str, str, str], now: float) -> None:
        a = n.alarm
        while self._sent_times and self._sent_times[0] <= now - 60.0:
            self._sent_times.popleft()
        if len(self._sent_times) >= self.section.max_per_minute:
            with self._lock:
                self._suppressed += 1
            log.warning("notifier %s: rate limit (%d/min) reached, dropped %s %s", self.name,
                        self.section.max_per_minute, n.status, a.id)
            return
        with self._lock:
            suppressed, self._suppressed = self._suppressed, 0
        if suppressed:
            n = Notification(n.status, n.alarm, suppressed)
        if not self._deliver(sender, n):
            with self._lock:
                self._suppressed += suppressed
            return
        self._sent_times.append(now)
        self.sent += 1
        if n.status == "firing":
            self._last_fired[key] = now
            self._sent_firing[a.id] = None
            while len(self._sent_firing) > _SENT_MEMORY:
                self._sent_firing.popitem(last=False)

    def _deliver(self, sender: Sender, n: Notification) -> bool:
        delay_s = self.section.backoff_s
        for attempt in range(self.section.retries + 1):
            try:
                sender.send(n)
                return True
            except NotifyError as exc:
                last_try = exc.permanent or attempt == self.section.retries or self._stop.is_set()
                log.warning("notifier %s: %s %s attempt %d failed: %s%s", self.name, n.status, n.alarm.id,
                            attempt + 1, exc, "" if last_try else f"; retry in {delay_s:.1f} s")
                if last_try:
                    break
                if self._stop.wait(delay_s):
                    break
                delay_s = min(self.section.backoff_max_s, delay_s * 2 if delay_s else self.section.backoff_s)
        self.failed += 1
        return False


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

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop every worker."""
        for w in self.workers:
            w._stop.set()
        for w in self.workers:
            w.close(timeout_s)
