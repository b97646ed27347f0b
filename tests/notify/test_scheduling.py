"""Retries scheduled by time: a newer notification (a critical) is not kept behind an earlier
one's retries to a receiver that fails, hangs or refuses; one alarm's notifications stay in
order; the pending set is bounded and drops warnings before criticals. Real sockets on
127.0.0.1, the worker's clock injected: nothing here measures wall-clock time."""

from __future__ import annotations

import logging
import random
import socket

import msgspec
import pytest

from rigmon.notify.dispatch import NotifierWorker
from rigmon.notify.senders import NotifyError
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


class Flaky:
    """A receiver that fails at random: retryable, permanent, or a sender bug."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.sent: list[Notification] = []

    def send(self, n: Notification) -> None:
        r = self.rnd.random()
        if r < 0.3:
            raise NotifyError("HTTP 503")
        if r < 0.33:
            raise NotifyError("HTTP 404", permanent=True)
        if r < 0.35:
            raise RuntimeError("bug")
        self.sent.append(n)

    def close(self) -> None:
        pass


@pytest.mark.parametrize("seed", range(4))
def test_random_failures_keep_each_alarms_order_and_the_bound(seed: int, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL, "rigmon.notify.dispatch")
    rnd = random.Random(seed)
    clock, receiver_ = FakeMonotonic(), Flaky(random.Random(seed + 1000))
    limit = rnd.choice([3, 10, 100])
    worker = NotifierWorker(section("webhook", "http://unused", queue_size=limit, retries=rnd.choice([0, 2, 5]),
                                    backoff_s=1.0, backoff_max_s=8.0, dedup_s=rnd.choice([0.0, 5.0]),
                                    max_per_minute=rnd.choice([5, 1000])), "w", receiver_, clock)
    worker.start()
    open_alarms: dict[int, str] = {}
    for i in range(200):
        k = rnd.randrange(6)
        severity: Severity = "critical" if k % 2 else "warning"
        aid = open_alarms.pop(k, None)
        status = "resolved" if aid else "firing"
        if aid is None:
            aid = open_alarms[k] = f"a{i:03d}"
        worker.submit(note(aid, severity, status, subject=f"s{k}"))
        with worker._wake:
            assert worker._count() <= limit
        if rnd.random() < 0.3:
            clock.t += rnd.random() * 3

    def drained() -> bool:
        clock.t += 10
        return worker.idle()

    wait_until(drained, 30.0)
    worker.close()
    sent = [(n.status, n.alarm.id) for n in receiver_.sent]
    for status, aid in sent:
        if status == "resolved":
            assert ("firing", aid) in sent and sent.index(("firing", aid)) < sent.index(("resolved", aid))
    by_subject: dict[str, list[str]] = {}
    for n in receiver_.sent:
        by_subject.setdefault(n.alarm.subject, []).append(n.alarm.id)
    for episodes in by_subject.values():
        assert episodes == sorted(episodes)  # one subject's episodes in order
    assert worker.sent == len(sent)
