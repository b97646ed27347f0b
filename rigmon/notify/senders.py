"""Senders: how one notification reaches a receiver (HTTP for the webhook kinds, a command),
and what a failed attempt says about retrying it."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urljoin

from rigmon.config import NotifySection
from rigmon.notify.payload import (
    Notification,
    command_environment,
    discord_payload,
    ntfy_request,
    slack_payload,
    webhook_payload,
)
from rigmon.redact import redact_text

if TYPE_CHECKING:
    import httpx

#: HTTP statuses worth retrying among the 4xx: timeout and rate limiting.
_RETRYABLE_4XX = {408, 425, 429}
#: How much of a receiver's answer, a redirect's Location or a command's output a failure quotes.
_QUOTED_CHARS = 200


class NotifyError(Exception):
    """Delivery failed; ``permanent`` when retrying cannot help (a 4xx answer, a redirect);
    ``retry_after_s`` when the receiver said how long to wait (``Retry-After``).

    The message goes to the agent's log as it is; ``redacted``, the same without its secrets, goes
    into every frame (see `NotifierWorker._failed`). A sender that quotes part of a longer text
    gives it (see `_quoted`); otherwise it is the message redacted.
    """

    def __init__(self, message: str, permanent: bool = False, retry_after_s: float | None = None,
                 redacted: str | None = None) -> None:
        super().__init__(message)
        self.permanent = permanent
        self.retry_after_s = retry_after_s
        self.redacted = redact_text(message) if redacted is None else redacted


def _quoted(template: str, text: str, *, tail: bool = False, permanent: bool = False,
            retry_after_s: float | None = None) -> NotifyError:
    """A `NotifyError` saying ``template`` with the first (``tail``: the last) `_QUOTED_CHARS`
    characters of ``text`` in its ``{quote}``: as they are in the message, for the log, and cut from
    ``text`` redacted whole in ``redacted``, for frames.

    Redacted before the cut, and the whole text rather than the lines at the cut: a cut parts a
    secret from what gives it away (a tail that starts inside ``token=...`` or after ``Bearer``, a
    head that ends inside a quoted password or a ``ghp_`` token), and what gives it away need not be
    on the same line (a JSON value after its key, ``Bearer`` and its token wrapped).
    """
    cut = slice(-_QUOTED_CHARS, None) if tail else slice(None, _QUOTED_CHARS)
    return NotifyError(template.format(quote=text[cut]), permanent=permanent, retry_after_s=retry_after_s,
                       redacted=template.format(quote=redact_text(text)[cut]))


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
        status = response.status_code
        if 300 <= status < 400:
            # Redirects are not followed (a POST, and its Authorization header, must not move
            # to another URL): retrying cannot help, the configured url is the one to fix.
            # A relative Location is taken against the url: its path is as secret as the url's
            # (Slack's /services/T/B/XXX), and only a whole URL loses it in frames.
            where = response.headers.get("Location", "")
            raise _quoted(f"HTTP {status} redirect to {{quote}}: set url to where it points",
                          urljoin(self.section.url, where) if where else "(no Location)", permanent=True)
        permanent = 400 <= status < 500 and status not in _RETRYABLE_4XX
        raise _quoted(f"HTTP {status}: {{quote}}", response.text, permanent=permanent,
                      retry_after_s=_retry_after_s(response.headers.get("Retry-After")))

    def close(self) -> None:
        self._client.close()


def _retry_after_s(value: str | None) -> float | None:
    """Seconds in a ``Retry-After`` header (its HTTP-date form is taken as absent)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 and seconds == seconds else None


class CommandSender:
    """Runs a command (argument list, no shell, its own session) with the alarm in ``RIGMON_ALARM_*``
    variables; on a timeout its whole process group is killed."""

    def __init__(self, section: NotifySection) -> None:
        self.section = section

    def send(self, n: Notification) -> None:
        env = {**os.environ, **command_environment(n)}
        try:
            # Its own session: on a timeout the whole process group is killed, not only the
            # program (a script's curl to a hung receiver would outlive it otherwise).
            proc = subprocess.Popen(list(self.section.command), env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise NotifyError(f"cannot run {self.section.command[0]}: {exc.strerror}", permanent=True) from None
        try:
            _, stderr = proc.communicate(timeout=self.section.timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise NotifyError(f"command timed out after {self.section.timeout_s} s (killed with its children)") \
                from None
        if proc.returncode != 0:
            err = stderr.decode("utf-8", "replace").strip()
            raise _quoted(f"command exited {proc.returncode}: {{quote}}", err, tail=True)

    def close(self) -> None:
        """Nothing held between runs."""


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill a timed-out command and everything it started in its session, and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    if proc.stderr is not None:
        proc.stderr.close()  # a child that left the group may still hold the pipe: do not read it
    proc.wait()


def make_sender(section: NotifySection) -> Sender:
    """The sender for a notifier's kind."""
    if section.kind == "command":
        return CommandSender(section)
    return HttpSender(section)
