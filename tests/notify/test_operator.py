"""What an operator with a webhook, ntfy or Slack would trip over: redirects, Retry-After,
lost notifications that nobody is told about, names that break headers or ping a channel."""

from __future__ import annotations

import base64
import logging
import sys
from pathlib import Path

import msgspec
import pytest

from rigmon.notify.dispatch import NotifierWorker
from rigmon.notify.payload import Notification, ntfy_request, slack_payload
from tests.notify.receiver import receiver, wait_until
from tests.notify.test_notifiers import FakeMonotonic, Recorder, alarm, firing, section


def test_a_redirect_is_not_retried_and_names_where_it_points(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "rigmon.notify.dispatch")
    with receiver(fail_first=100, fail_status=301, fail_headers={"Location": "https://ntfy.example/rig"}) as rec:
        worker = NotifierWorker(section("ntfy", rec.url, retries=5), "n")
        worker.start()
        worker.submit(firing())
        wait_until(lambda: worker.failed == 1)
        worker.close()
    assert rec.attempts == 1
    assert any("redirect to https://ntfy.example/rig" in r.getMessage() for r in caplog.records)


def test_retry_after_is_honoured_within_backoff_max(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "rigmon.notify.dispatch")
    clock = FakeMonotonic()
    with receiver(fail_first=1, fail_status=429, fail_headers={"Retry-After": "20"}) as rec:
        worker = NotifierWorker(section("slack", rec.url, backoff_s=1.0, backoff_max_s=60.0), "s", monotonic=clock)
        worker.start()
        worker.submit(firing())
        wait_until(lambda: any("retry in 20.0 s" in r.getMessage() for r in caplog.records))
        clock.t += 21
        wait_until(lambda: len(rec.ok()) == 1)
        worker.close()
    assert worker.sent == 1


def test_a_notification_lost_after_its_retries_is_counted_in_the_next_one() -> None:
    with receiver(fail_first=1) as rec:
        worker = NotifierWorker(section("webhook", rec.url, retries=0), "w")
        worker.start()
        worker.submit(firing(aid="a1", subject="a"))
        wait_until(lambda: worker.failed == 1)
        worker.submit(firing(aid="a2", subject="b"))
        wait_until(lambda: len(rec.ok()) == 1)
        worker.close()
    body = rec.ok()[0].json()
    assert body["alarm"]["id"] == "a2" and body["suppressed"] == 1 and body["text"].endswith("(+1 suppressed)")


class Broken(Recorder):
    """A sender with a bug: the first send raises something that is not a NotifyError."""

    def send(self, n: Notification) -> None:
        if not self.sent and not getattr(self, "raised", False):
            self.raised = True
            raise UnicodeEncodeError("ascii", "ö", 0, 1, "ordinal not in range(128)")
        super().send(n)


def test_a_sender_bug_is_a_counted_failure_not_a_silent_loss() -> None:
    rec = Broken()
    worker = NotifierWorker(section("webhook", "http://unused"), "w", rec)
    worker.start()
    worker.submit(firing(aid="a1", subject="a"))
    wait_until(lambda: worker.failed == 1)
    worker.submit(firing(aid="a2", subject="b"))
    wait_until(lambda: len(rec.sent) == 1)
    worker.close()
    assert rec.sent[0].alarm.id == "a2" and rec.sent[0].suppressed == 1


def test_ntfy_title_with_a_non_ascii_node_name_arrives() -> None:
    n = Notification("firing", msgspec.structs.replace(alarm(), node="rig-größe"))
    _, headers = ntfy_request(n)
    word = headers["Title"]
    assert word.startswith("=?utf-8?b?") and word.isascii()
    assert base64.b64decode(word[len("=?utf-8?b?"):-2]).decode() == "rigmon rig-größe: psu_rail_low_critical critical"
    with receiver() as rec:
        worker = NotifierWorker(section("ntfy", rec.url), "n")
        worker.start()
        worker.submit(n)
        wait_until(lambda: len(rec.ok()) == 1)
        worker.close()
    assert rec.ok()[0].headers["Title"] == word and "rig-größe" in rec.ok()[0].body.decode()


def test_slack_text_cannot_ping_a_channel_or_forge_a_link() -> None:
    a = msgspec.structs.replace(alarm(), subject="tb:<!channel> & <https://evil|dock>")
    text = slack_payload(Notification("firing", a))["text"]
    assert "<" not in text and ">" not in text
    assert "tb:&lt;!channel&gt; &amp; &lt;https://evil|dock&gt;" in text


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_command_that_times_out_is_killed_with_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = ("import subprocess, sys, time; "
              "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              "open(sys.argv[1], 'w').write(str(c.pid)); time.sleep(60)")
    worker = NotifierWorker(section("command", command=(sys.executable, "-c", script, str(pid_file)), timeout_s=3.0,
                                    retries=0), "cmd")
    worker.start()
    worker.submit(firing())
    wait_until(lambda: worker.failed == 1, 20.0)
    worker.close()
    pid = int(pid_file.read_text())
    wait_until(lambda: not _alive(pid))


def test_slack_text_cannot_mention_everyone_on_mattermost_or_rocket_chat() -> None:
    a = msgspec.structs.replace(alarm(), subject="dock @channel @all")
    text = slack_payload(Notification("firing", a))["text"]
    assert "@channel" not in text and "@all" not in text
    assert "dock @\u200bchannel @\u200ball" in text


def test_stopping_with_a_hung_receiver_says_what_is_left_unsent(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "rigmon.notify.dispatch")
    rec = Recorder()
    rec.gate.clear()
    worker = NotifierWorker(section("webhook", "http://unused"), "w", rec)
    worker.start()
    for i in range(3):
        worker.submit(firing(aid=f"a{i}", subject=f"s{i}"))
    wait_until(rec.entered.is_set)
    worker.close(timeout_s=0.05)
    rec.gate.set()
    assert any("stopping with 3 notification(s) not sent" in r.getMessage() for r in caplog.records)


def test_a_failing_receiver_shows_in_the_notifiers_status_until_one_gets_through() -> None:
    """A dead webhook was only in the agent's log: the frames (dashboard, /metrics, alarms) said nothing."""
    from rigmon.notify.dispatch import Notifiers

    with receiver(fail_first=1, fail_status=503) as rec:
        hub = Notifiers([section("webhook", rec.url, retries=0, name="lab-hook"),
                         section("webhook", rec.url, retries=0, name="other", min_severity="critical")])
        assert hub.status().state == "ok"
        hub.start()
        hub.submit(firing(severity="warning", aid="r-a1"))  # only lab-hook wants a warning
        wait_until(lambda: hub.workers[0].failed == 1)
        status = hub.status()
        assert (status.state, status.ok) == ("error", False)
        assert status.error is not None and status.error.startswith("lab-hook: ") and "503" in status.error
        assert "(1 lost)" in status.error and "other" not in status.error
        hub.submit(firing(severity="warning", aid="r-a2", subject="gpu:3"))
        wait_until(lambda: hub.workers[0].sent == 1)
        assert hub.status().state == "ok"
        hub.close()
