"""Notifiers against a real HTTP receiver on loopback and a real command: payloads, retries,
de-duplication, rate limit, and a queue that never blocks."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from rigmon.config import NotifySection
from rigmon.notify.dispatch import NotifierWorker, Notifiers
from rigmon.notify.payload import Notification
from rigmon.schema import Alarm, Severity
from tests.notify.receiver import receiver, wait_until

T0 = 1_700_000_000.0


def alarm(subject: str = "psu", severity: Severity = "critical", aid: str = "r-a1", state: str = "firing") -> Alarm:
    return Alarm(id=aid, rule="psu_rail_low_critical", rule_kind="threshold", severity=severity, node="v100-a",
                 subject=subject, state=state, message="12 V rail minimum 11.42 V is below 11.5 V",  # type: ignore[arg-type]
                 started_at=T0, updated_at=T0, value=11.42, fired_at=T0)


def firing(**kw: str) -> Notification:
    return Notification("firing", alarm(**kw))  # type: ignore[arg-type]


def resolved(**kw: str) -> Notification:
    return Notification("resolved", alarm(state="resolved", **kw))  # type: ignore[arg-type]


def section(kind: str, url: str = "", **kw: object) -> NotifySection:
    return NotifySection(kind=kind, url=url, **({"backoff_s": 0.01, "backoff_max_s": 0.05} | kw))  # type: ignore[arg-type]


class FakeMonotonic:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_webhook_firing_and_resolved() -> None:
    with receiver() as rec:
        hub = Notifiers([section("webhook", rec.url, headers={"X-Rig": "lab"})])
        hub.start()
        hub.submit(firing())
        hub.submit(resolved())
        wait_until(lambda: len(rec.ok()) == 2)
        hub.close()
    first, second = rec.ok()
    body = first.json()
    assert first.path == "/hook" and first.headers["X-Rig"] == "lab"
    assert first.headers["Content-Type"] == "application/json"
    assert {k: body[k] for k in ("version", "source", "status", "node", "severity", "rule", "subject")} == {
        "version": 1, "source": "rigmon", "status": "firing", "node": "v100-a", "severity": "critical",
        "rule": "psu_rail_low_critical", "subject": "psu"}
    assert body["text"] == "[CRITICAL] v100-a psu: 12 V rail minimum 11.42 V is below 11.5 V"
    assert body["alarm"]["id"] == "r-a1" and body["alarm"]["value"] == 11.42 and body["suppressed"] == 0
    assert second.json()["status"] == "resolved" and second.json()["text"].startswith("[RESOLVED]")


def test_receiver_that_fails_then_recovers_gets_it_once() -> None:
    with receiver(fail_first=3) as rec:
        worker = NotifierWorker(section("webhook", rec.url, retries=5), "w")
        worker.start()
        worker.submit(firing())
        wait_until(lambda: len(rec.ok()) == 1)
        wait_until(worker.idle)
        worker.close()
    assert rec.attempts == 4 and worker.sent == 1 and worker.failed == 0


def test_retries_give_up_and_a_4xx_is_not_retried() -> None:
    with receiver(fail_first=100) as rec:
        worker = NotifierWorker(section("webhook", rec.url, retries=2), "w")
        worker.start()
        worker.submit(firing())
        wait_until(lambda: worker.failed == 1)
        assert rec.attempts == 3
        worker.close()
    with receiver(fail_first=100, fail_status=404) as rec:
        worker = NotifierWorker(section("webhook", rec.url, retries=5), "w")
        worker.start()
        worker.submit(firing())
        wait_until(lambda: worker.failed == 1)
        worker.close()
        assert rec.attempts == 1


def test_unreachable_receiver_is_retried_then_dropped() -> None:
    with receiver() as rec:
        url = rec.url
    worker = NotifierWorker(section("webhook", url, retries=1), "w")
    worker.start()
    worker.submit(firing())
    wait_until(lambda: worker.failed == 1)
    worker.close()


def test_ntfy_slack_discord_payloads() -> None:
    with receiver() as rec:
        hub = Notifiers([section("ntfy", rec.url), section("slack", rec.url), section("discord", rec.url)])
        hub.start()
        hub.submit(firing())
        wait_until(lambda: len(rec.ok()) == 3)
        hub.close()
    ntfy = next(r for r in rec.ok() if "Title" in r.headers)
    assert ntfy.headers["Title"] == "rigmon v100-a: psu_rail_low_critical critical"
    assert ntfy.headers["Priority"] == "5" and ntfy.headers["Tags"] == "rotating_light"
    assert ntfy.body.decode().startswith("[CRITICAL] v100-a psu: 12 V rail minimum")
    bodies = [r.json() for r in rec.ok() if r is not ntfy]
    slack = next(b for b in bodies if "text" in b)
    discord = next(b for b in bodies if "content" in b)
    assert slack == {"text": ":rotating_light: [CRITICAL] v100-a psu: 12 V rail minimum 11.42 V is below 11.5 V"}
    assert discord["allowed_mentions"] == {"parse": []} and "11.42 V" in discord["content"]


def test_min_severity_and_send_resolved() -> None:
    with receiver() as rec:
        hub = Notifiers([section("webhook", rec.url, min_severity="critical", send_resolved=False)])
        hub.start()
        hub.submit(firing(severity="warning", aid="w1", subject="a"))
        hub.submit(firing(aid="c1", subject="b"))
        hub.submit(resolved(aid="c1", subject="b"))
        wait_until(hub.idle)
        hub.close()
    assert [r.json()["alarm"]["id"] for r in rec.ok()] == ["c1"]


def test_command_notifier_runs_a_real_command_without_a_shell(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    script = ("import json, os, sys; "
              "json.dump({k: v for k, v in os.environ.items() if k.startswith('RIGMON_ALARM_')} | "
              "{'argv': sys.argv[1:]}, open(sys.argv[1], 'w'))")
    worker = NotifierWorker(section("command", command=(sys.executable, "-c", script, str(out), "$HOME;")), "cmd")
    worker.start()
    worker.submit(firing())
    wait_until(lambda: worker.sent == 1)
    worker.close()
    env = json.loads(out.read_text())
    assert env["argv"] == [str(out), "$HOME;"]  # no shell: nothing expanded
    assert env["RIGMON_ALARM_STATUS"] == "firing" and env["RIGMON_ALARM_SEVERITY"] == "critical"
    assert env["RIGMON_ALARM_RULE"] == "psu_rail_low_critical" and env["RIGMON_ALARM_VALUE"] == "11.42"
    assert json.loads(env["RIGMON_ALARM_JSON"])["alarm"]["subject"] == "psu"


def test_failing_command_is_retried(tmp_path: Path) -> None:
    marker = tmp_path / "tried"
    script = ("import pathlib, sys; p = pathlib.Path(sys.argv[1]); "
              "sys.exit(0) if p.exists() else (p.write_text('x'), sys.exit(3))")
    worker = NotifierWorker(section("command", command=(sys.executable, "-c", script, str(marker))), "cmd")
    worker.start()
    worker.submit(firing())
    wait_until(lambda: worker.sent == 1)
    worker.close()
    assert worker.failed == 0 and marker.exists()


class Recorder:
    def __init__(self) -> None:
        self.sent: list[Notification] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def send(self, n: Notification) -> None:
        self.entered.set()
        self.gate.wait(10)
        self.sent.append(n)

    def close(self) -> None:
        pass


def test_flapping_is_deduplicated_and_a_lasting_refire_is_sent_after_the_window() -> None:
    clock, rec = FakeMonotonic(), Recorder()
    worker = NotifierWorker(section("webhook", "http://unused", dedup_s=300.0), "w", rec, clock)
    worker.start()
    worker.submit(firing(aid="a1"))
    worker.submit(resolved(aid="a1"))
    worker.submit(firing(aid="a2"))  # flaps back within the window: held
    worker.submit(resolved(aid="a2"))  # and resolves: nothing to say
    worker.submit(firing(aid="a3"))  # fires again and stays
    wait_until(worker.idle)
    assert [(n.status, n.alarm.id) for n in rec.sent] == [("firing", "a1"), ("resolved", "a1")]
    clock.t += 301
    wait_until(lambda: len(rec.sent) == 3)
    worker.submit(resolved(aid="a3"))
    wait_until(lambda: len(rec.sent) == 4)
    worker.close()
    assert [(n.status, n.alarm.id) for n in rec.sent[2:]] == [("firing", "a3"), ("resolved", "a3")]
    assert worker.deduplicated == 2


def test_rate_limit_drops_and_counts() -> None:
    clock, rec = FakeMonotonic(), Recorder()
    worker = NotifierWorker(section("webhook", "http://unused", max_per_minute=2), "w", rec, clock)
    worker.start()
    for i in range(5):
        worker.submit(firing(aid=f"a{i}", subject=f"s{i}"))
    wait_until(worker.idle)
    assert [n.alarm.id for n in rec.sent] == ["a0", "a1"]
    worker.submit(resolved(aid="a3", subject="s3"))  # its firing was dropped: not sent either
    clock.t += 61
    worker.submit(firing(aid="a9", subject="s9"))
    wait_until(lambda: len(rec.sent) == 3)
    worker.close()
    assert rec.sent[2].alarm.id == "a9" and rec.sent[2].suppressed == 3


def test_submit_never_blocks_and_a_full_queue_drops_the_oldest() -> None:
    rec = Recorder()
    rec.gate.clear()  # the receiver hangs
    worker = NotifierWorker(section("webhook", "http://unused", queue_size=10, max_per_minute=1000), "w", rec)
    worker.start()
    worker.submit(firing(aid="first", subject="first"))
    wait_until(rec.entered.is_set)  # the first is in the sender, stuck
    for i in range(500):
        worker.submit(firing(aid=f"a{i}", subject=f"s{i}"))
    assert worker.dropped == 490
    rec.gate.set()
    wait_until(lambda: len(rec.sent) == 11)
    worker.close()
    assert [n.alarm.id for n in rec.sent[1:]] == [f"a{i}" for i in range(490, 500)]
    assert rec.sent[1].suppressed == 490


@pytest.mark.parametrize("kind", ["webhook", "ntfy", "slack", "discord"])
def test_http_kinds_need_a_url(kind: str) -> None:
    with pytest.raises(ValueError, match="url"):
        NotifySection(kind=kind)  # type: ignore[arg-type]
