"""The notifiers' status travels in every frame (dashboard, journal, bug-report bundles): why a receiver fails
is said there without its secrets (a redirect's Location, a URL a command printed, a token in an answer's body
or a command's output), which only the agent's log keeps whole."""

from __future__ import annotations

import logging
import sys

import pytest

from rigmon.notify.dispatch import Notifiers
from rigmon.redact import redact_text
from rigmon.schema import CollectorStatus
from tests.notify.receiver import receiver, wait_until
from tests.notify.test_notifiers import firing, section

SECRET_URL = "https://hooks.example.org/services/T0/B0/XSECRET?token=QSECRET"


def failed_status(hub: Notifiers) -> CollectorStatus:
    """The status of ``hub`` (one notifier, no retries) once its notifier failed to send an alarm."""
    hub.start()
    hub.submit(firing())
    wait_until(lambda: hub.workers[0].failed == 1)
    status = hub.status()
    hub.close()
    return status


def command_failure(printed: str, code: int) -> CollectorStatus:
    """The status after a command notifier printed ``printed`` on stderr and exited ``code``."""
    script = f"import sys; sys.stderr.write({printed!r}); sys.exit({code})"
    return failed_status(Notifiers([section("command", "", command=[sys.executable, "-c", script], retries=0,
                                            name="pager")]))


def test_a_redirects_location_is_in_the_log_not_in_the_status(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "rigmon.notify.dispatch")
    with receiver(fail_first=100, fail_status=308, fail_headers={"Location": SECRET_URL}) as rec:
        status = failed_status(Notifiers([section("webhook", rec.url, retries=0, name="slack-hook")]))
    # Before, the status said "redirect to https://hooks.example.org/services/T0/B0/XSECRET?token=QSECRET".
    assert status.error is not None and "HTTP 308 redirect to https://hooks.example.org/<redacted>" in status.error
    assert "XSECRET" not in status.error and "QSECRET" not in status.error
    assert any(SECRET_URL in r.getMessage() for r in caplog.records)


def test_a_url_a_command_printed_is_not_in_the_status() -> None:
    status = command_failure(f"failed posting to {SECRET_URL}\n", 3)
    assert status.error is not None and "command exited 3: failed posting to https://hooks.example.org/<redacted>" \
        in status.error
    assert "XSECRET" not in status.error


def test_a_token_in_a_webhooks_answer_is_not_in_the_status() -> None:
    body = b'{"error": "invalid token", "token": "xoxb-1111-2222-TSECRET", "hint": "send Authorization: Bearer ..."}'
    with receiver(fail_first=100, fail_status=401, fail_body=body) as rec:
        status = failed_status(Notifiers([section("slack", rec.url, retries=0, name="slack-hook")]))
    # Before: the answer went into every frame as it came, the token with it.
    assert status.error is not None and "TSECRET" not in status.error
    assert 'HTTP 401: {"error": "invalid token", "token": "<redacted>"' in status.error


def test_credentials_a_command_printed_are_not_in_the_status() -> None:
    printed = ("curl -H 'Authorization: Bearer ASECRET1' failed\n"
               "retrying with token=TSECRET2 and api_key=KSECRET3; Slack said xoxb-123456-SSECRET4\n")
    status = command_failure(printed, 2)
    assert status.error is not None and status.error.startswith("pager: command exited 2: ")
    assert not any(secret in status.error for secret in ("ASECRET1", "TSECRET2", "KSECRET3", "SSECRET4"))
    assert "Authorization: <redacted>" in status.error and "token=<redacted> and api_key=<redacted>" in status.error


@pytest.mark.parametrize(("text", "said"), [
    ("Authorization: Bearer abc.def-ghi", "Authorization: <redacted>"),
    ("authorization=Basic dXNlcjpwYXNz", "authorization=<redacted>"),
    ("sent Bearer eyJhbGciOi.eyJzdWIi.sig to it", "sent Bearer <redacted> to it"),
    ("sent Basic dXNlcjpwYXNz to it", "sent Basic <redacted> to it"),
    ("Basic authentication failed", "Basic authentication failed"),  # a word, not a credential
    ("?key=K1&token=T2&secret=S3&password=P4&mode=x", "?key=<redacted>&token=<redacted>&secret=<redacted>"
                                                      "&password=<redacted>&mode=x"),
    ("client_secret = 'a b' access_token=\"q\" passwd=z", "client_secret = '<redacted>' access_token=\"<redacted>\""
                                                       " passwd=<redacted>"),
    ('{"ok": false, "access_token": "T1", "password": "P2", "error": "invalid_auth"}',
     '{"ok": false, "access_token": "<redacted>", "password": "<redacted>", "error": "invalid_auth"}'),
    ("(token=T1) and [key=K2]", "(token=<redacted>) and [key=<redacted>]"),
    ("tokens xoxb-1234-5678-abcdef, xapp-1-A0-12345 and ghp_0123456789abcdefghij", "tokens <redacted>, <redacted> "
                                                                                  "and <redacted>"),
    ("see https://u:p@hooks.example.org/x?token=T", "see https://<redacted>@hooks.example.org/<redacted>"),
    ("HTTP 500: the token expired; try again", "HTTP 500: the token expired; try again"),
    ("", ""),
])
def test_free_text_loses_credentials_and_keeps_the_rest(text: str, said: str) -> None:
    assert redact_text(text) == said


# A failure quotes 200 characters of a longer text (the head of an answer, the tail of a command's
# output); before, the sender cut first and the dispatch redacted the cut, so a secret the cut parted
# from its name or shape went into every frame.
_HEAD_ENDS_IN_A_QUOTED_PASSWORD = ('{"detail": "' + "d" * 162 + '", "password": "',
                                   "correct horse battery staple", '"}')
_HEAD_ENDS_IN_A_GITHUB_TOKEN = ("bad credentials " + "." * 169 + " ", "ghp_0123456789abcdefghijklmnopqrstuvwxyz", "")


@pytest.mark.parametrize(("before", "secret", "after"), [_HEAD_ENDS_IN_A_QUOTED_PASSWORD, _HEAD_ENDS_IN_A_GITHUB_TOKEN],
                         ids=["quoted-password", "github-token"])
def test_an_answer_cut_inside_a_secret_loses_it(before: str, secret: str, after: str,
                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "rigmon.notify.dispatch")
    assert len(before) < 200 < len(before) + len(secret)  # the 200 characters end inside the secret
    quoted = secret[:200 - len(before)]
    with receiver(fail_first=100, fail_status=401, fail_body=(before + secret + after).encode()) as rec:
        status = failed_status(Notifiers([section("webhook", rec.url, retries=0, name="hook")]))
    # Before: "HTTP 401: ...\"password\": \"correct ho" (no closing quote, no value) and "... ghp_0123456789"
    # (too short for the shape of a GitHub token) were said as they were.
    assert status.error is not None and status.error.startswith("hook: HTTP 401: " + before[:20])
    assert quoted not in status.error and secret[:4] not in status.error
    assert any(f"HTTP 401: {before}{quoted}" in r.getMessage() for r in caplog.records)  # the log keeps it


@pytest.mark.parametrize("name", ["token=", "Authorization: Bearer "])
def test_a_commands_output_cut_inside_a_secret_loses_it(name: str) -> None:
    secret = "TAILSECRET0123456789"
    rest = " was refused, see the receiver's log " + "." * (200 - len(secret) - 37)
    assert len(secret + rest) == 200  # the last 200 characters start inside the secret
    printed = f"retrying: {name}ab{secret}{rest}\n"
    status = command_failure(printed, 4)
    # Before: "command exited 4: TAILSECRET0123456789 was refused..." (the tail had lost "token=ab").
    assert status.error is not None and status.error.startswith("pager: command exited 4: ")
    assert "SECRET" not in status.error and "<redacted>" in status.error


def test_a_relative_redirects_location_is_redacted_as_the_url_it_points_to(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "rigmon.notify.dispatch")
    with receiver(fail_first=100, fail_status=301, fail_headers={"Location": "/services/T0/B0/XSECRET"}) as rec:
        status = failed_status(Notifiers([section("webhook", rec.url, retries=0, name="hook")]))
    host = rec.url.rsplit("/", 1)[0]
    # Before: "HTTP 301 redirect to /services/T0/B0/XSECRET" (only a whole URL lost its path).
    assert status.error == f"hook: HTTP 301 redirect to {host}/<redacted>: set url to where it points (1 lost)"
    assert any(f"redirect to {host}/services/T0/B0/XSECRET" in r.getMessage() for r in caplog.records)
