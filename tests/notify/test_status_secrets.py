"""The notifiers' status travels in every frame (dashboard, journal, bug-report bundles): why a receiver fails
is said there without its secrets (a redirect's Location, a URL a command printed), which only the agent's
log keeps whole."""

from __future__ import annotations

import logging
import sys

import pytest

from rigmon.notify.dispatch import Notifiers
from tests.notify.receiver import receiver, wait_until
from tests.notify.test_notifiers import firing, section

SECRET_URL = "https://hooks.example.org/services/T0/B0/XSECRET?token=QSECRET"


def test_a_redirects_location_is_in_the_log_not_in_the_status(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "rigmon.notify.dispatch")
    with receiver(fail_first=100, fail_status=308, fail_headers={"Location": SECRET_URL}) as rec:
        hub = Notifiers([section("webhook", rec.url, retries=0, name="slack-hook")])
        hub.start()
        hub.submit(firing())
        wait_until(lambda: hub.workers[0].failed == 1)
        status = hub.status()
        hub.close()
    # Before, the status said "redirect to https://hooks.example.org/services/T0/B0/XSECRET?token=QSECRET".
    assert status.error is not None and "HTTP 308 redirect to https://hooks.example.org/<redacted>" in status.error
    assert "XSECRET" not in status.error and "QSECRET" not in status.error
    assert any(SECRET_URL in r.getMessage() for r in caplog.records)


def test_a_url_a_command_printed_is_not_in_the_status() -> None:
    script = f"import sys; sys.stderr.write('failed posting to {SECRET_URL}\\n'); sys.exit(3)"
    hub = Notifiers([section("command", "", command=[sys.executable, "-c", script], retries=0, name="pager")])
    hub.start()
    hub.submit(firing())
    wait_until(lambda: hub.workers[0].failed == 1)
    status = hub.status()
    hub.close()
    assert status.error is not None and "command exited 3: failed posting to https://hooks.example.org/<redacted>" \
        in status.error
    assert "XSECRET" not in status.error
