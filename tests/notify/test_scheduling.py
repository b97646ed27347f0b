"""Retries scheduled by time: a newer notification (a critical) is not kept behind an earlier
one's retries to a receiver that fails, hangs or refuses; one alarm's notifications stay in
order; the pending set is bounded and drops warnings before criticals. Real sockets on
127.0.0.1, the worker's clock injected: nothing here measures wall-clock time."""

from __future__ import annotations

import logging
import socket

import msgspec
import pytest

from rigmon.notify.dispatch import NotifierWorker
from rigmon.notify.payload import Notification
from rigmon.schema import Severity
from tests.notify.receiver import receiver, wait_until
from tests.notify.test_notifiers import FakeMonotonic, Recorder, alarm, section


def note(aid: str, severity: Severity, status: str = "firing", subject: str = "psu") -> Notification:
    a = alarm(subject=subject, severity=severity, aid=aid, state=status)
    a = msgspec.structs.replace(a, rule=f"psu_rail_low_{severity}")
    return Notification(status, a)  # type: ignore[arg-type]


def ids(rec_bodies: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(b["status"], b["alarm"]["id"]) for b in rec_bodies]  # type: ignore[index]


def test_a_critical_does_not_wait_behind_a_warnings_retries_to_a_failing_receiver() -> None:
    clock = FakeMonotonic()
    with receiver(fail_first=1, fail_status=503) as rec:
        worker = NotifierWorker(section("webhook", rec.url, backoff_s=30.0, backoff_max_s=60.0), "w",
                                monotonic=clock)
        worker.start()
        worker.submit(note("w1", "warning"))
        wait_until(lambda: rec.attempts == 1)  # the warning failed; its retry is due in 30 s
        worker.submit(note("c1", "critical"))
        wait_until(lambda: len(rec.ok()) == 1)
        assert ids([r.json() for r in rec.ok()]) == [("firing", "c1")]
        clock.t += 31
        wait_until(lambda: len(rec.ok()) == 2)
        worker.close()
    assert ids([r.json() for r in rec.ok()]) == [("firing", "c1"), ("firing", "w1")]
    assert worker.sent == 2 and worker.failed == 0


def test_a_critical_waits_at_most_for_the_attempt_in_progress_to_a_hanging_receiver() -> None:
    clock = FakeMonotonic()
    with receiver(hang_first=1) as rec:
        worker = NotifierWorker(section("webhook", rec.url, timeout_s=0.5, backoff_s=30.0, backoff_max_s=60.0),
                                "w", monotonic=clock)
        worker.start()
        worker.submit(note("w1", "warning"))
        assert rec.hanging.wait(10)  # the warning's request hangs until its timeout
        worker.submit(note("c1", "critical"))
        wait_until(lambda: len(rec.ok()) == 1)
        assert ids([r.json() for r in rec.ok()]) == [("firing", "c1")]
        clock.t += 31
        wait_until(lambda: len(rec.ok()) == 2)
        worker.close()
    assert ids([r.json() for r in rec.ok()]) == [("firing", "c1"), ("firing", "w1")]


def test_a_refusing_receiver_keeps_each_alarms_order(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as s:  # a port nothing listens on: connections are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    clock = FakeMonotonic()
    worker = NotifierWorker(section("webhook", f"http://127.0.0.1:{port}/hook", backoff_s=5.0, backoff_max_s=60.0),
                            "w", monotonic=clock)
    caplog.set_level(logging.WARNING, "rigmon.notify.dispatch")
    worker.start()
    worker.submit(note("a1", "warning"))
    worker.submit(note("a1", "warning", "resolved"))  # must wait for its firing
    worker.submit(note("b1", "critical"))
    wait_until(lambda: sum("attempt 1 failed" in r.getMessage() for r in caplog.records) == 2)
    assert not any("resolved a1" in r.getMessage() for r in caplog.records)  # never tried before its firing
    with receiver(port=port) as rec:
        clock.t += 6
        wait_until(lambda: len(rec.ok()) == 3)
        worker.close()
    order = ids([r.json() for r in rec.ok()])
    assert order.index(("firing", "a1")) < order.index(("resolved", "a1"))
    assert sorted(order) == [("firing", "a1"), ("firing", "b1"), ("resolved", "a1")]
    assert worker.failed == 0


def test_a_full_pending_set_drops_warnings_before_a_critical() -> None:
    rec = Recorder()
    rec.gate.clear()  # the receiver hangs
    worker = NotifierWorker(section("webhook", "http://unused", queue_size=3, max_per_minute=1000), "w", rec)
    worker.start()
    worker.submit(note("first", "warning", subject="first"))
    wait_until(rec.entered.is_set)
    worker.submit(note("c1", "critical", subject="c"))
    for i in range(10):
        worker.submit(note(f"w{i}", "warning", subject=f"s{i}"))
    assert worker.dropped == 8
    rec.gate.set()
    wait_until(lambda: len(rec.sent) == 4)
    worker.close()
    assert [n.alarm.id for n in rec.sent] == ["first", "c1", "w8", "w9"]
    assert rec.sent[1].suppressed == 8


def test_a_resolution_of_an_alarm_fired_before_a_restart_is_sent() -> None:
    """The firing was sent by the agent's previous run (the README says a carried alarm that
    clears is notified as resolved); only a firing this notifier lost holds its resolution back."""
    rec = Recorder()
    worker = NotifierWorker(section("webhook", "http://unused"), "w", rec)
    worker.start()
    worker.submit(note("old-run-a3", "critical", "resolved"))
    wait_until(lambda: len(rec.sent) == 1)
    worker.close()
    assert rec.sent[0].status == "resolved"
