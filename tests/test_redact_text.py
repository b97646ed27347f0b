"""`redact_text` on the credentials free text gives away beyond ``key=value`` and JSON (YAML and log
lines, curl's ``-u``, ``user:password@host``, environment dumps), and on the ordinary failures the
notifiers say, which it leaves whole."""

from __future__ import annotations

import pytest

from rigmon.redact import redact_text


@pytest.mark.parametrize(("text", "said"), [
    # YAML and log lines: a password's value after an unquoted colon.
    ("password: hunter2", "password: <redacted>"),
    ("login failed (Password:hunter2)", "login failed (Password:<redacted>)"),
    ("smtp:\n  user: alerts\n  db_pass: 'x y'\n  passphrase: s3",
     "smtp:\n  user: alerts\n  db_pass: '<redacted>'\n  passphrase: <redacted>"),
    # A key's, token's or secret's there when it has a token's shape (a digit, or 16 characters).
    ("X-Api-Key: k1 rejected", "X-Api-Key: <redacted> rejected"),
    ("token: eyJhbGciOiJIUzI1NiJ9", "token: <redacted>"),
    ("client_secret: abcdefghijklmnopqrst", "client_secret: <redacted>"),
    # curl's user and password, in every spelling; a user alone is no secret.
    ("curl -u alice:s3cret https://hooks.example.org", "curl -u <redacted> https://hooks.example.org"),
    ("curl --user alice:s3cret -d x", "curl --user <redacted> -d x"),
    ("curl --user=alice:s3cret", "curl --user=<redacted>"),
    ("curl -ualice:s3cret", "curl -u<redacted>"),
    ("curl -U proxy:pw --proxy-user 'p:w x'", "curl -U <redacted> --proxy-user '<redacted>'"),
    ("curl -u alice https://h", "curl -u alice https://h"),
    # user:password@host without a scheme (git remotes, proxies).
    ("fatal: unable to access alice:s3cret@git.example.org/repo",
     "fatal: unable to access <redacted>@git.example.org/repo"),
    ("proxy svc_bot:pw%40x@10.0.0.1:3128 refused", "proxy <redacted>@10.0.0.1:3128 refused"),
])
def test_credentials_beyond_key_value_are_redacted(text: str, said: str) -> None:
    assert redact_text(text) == said


def test_an_environment_dump_loses_every_secret_and_keeps_the_rest() -> None:
    # What `env` prints when a notify script dumps it to stderr.
    dump = ("HOME=/root\nPGPASSWORD=hunter2\nMYSQL_PWD=m1\nSMTP_PASS=p2\nGPG_PASSPHRASE=p3\n"
            "AWS_SECRET_ACCESS_KEY=abc/def+ghi==\nGITHUB_TOKEN=ghp_0123456789abcdefghijklmn\nSHELL=/bin/bash")
    assert redact_text(dump) == (
        "HOME=/root\nPGPASSWORD=<redacted>\nMYSQL_PWD=<redacted>\nSMTP_PASS=<redacted>\nGPG_PASSPHRASE=<redacted>\n"
        "AWS_SECRET_ACCESS_KEY=<redacted>\nGITHUB_TOKEN=<redacted>\nSHELL=/bin/bash")


@pytest.mark.parametrize("text", [
    "connection refused",
    "HTTP 500: Internal Server Error",
    "timed out after 10 s",
    "Basic auth required",
    "key not found",
    "ConnectError: [Errno 111] Connection refused",
    "ReadTimeout: timed out",
    "command timed out after 10.0 s (killed with its children)",
    "cannot run /usr/local/bin/page-me: No such file or directory",
    "HTTP 308 redirect to (no Location): set url to where it points",
    'HTTP 200: {"ok": false, "error": "invalid_auth"}',
    "HTTP 403: missing key: user_id",
    "HTTP 401: token: expired",
    "webhook secret: mismatch",
    "curl: (22) The requested URL returned error: 401",
    "curl: (6) Could not resolve host: hooks.example.org",
    "sort -u alarms.txt; curl --user-agent=rigmon:1 failed",
    "mail to ops@example.org bounced at 12:30@relay1",
    "the compass: north, compass=south",
    "[sudo] password for rigmon: ",
    "Password: ",
])
def test_ordinary_failures_stay_whole(text: str) -> None:
    assert redact_text(text) == text
