"""Notifications of one alarm identity stay in order when its subject changes mid-episode (an md array
renumbered md127 -> md126 while its firing waits for a retry): the notifier's lanes are keyed by the
alarm's identity (`Alarm.identity`), not its subject. The real engine makes the alarms; a real HTTP
receiver that fails the first request; the worker's clock injected."""

from __future__ import annotations

from typing import Any

from rigmon.alarms.engine import AlarmEngine
from rigmon.notify.dispatch import NotifierWorker
from rigmon.notify.payload import Notification
from tests.alarms.helpers import T0, FakeClock, default
from tests.notify.receiver import receiver, wait_until
from tests.notify.test_notifiers import FakeMonotonic, section

UUID = "3b1f2c4e-0a1b-2c3d-4e5f-60718293a4b5"


def arrays(name: str, health: str) -> dict[str, Any]:
    return {"raid": [{"name": name, "uuid": UUID, "health": health, "members": []}]}


def notify(worker: NotifierWorker, e: AlarmEngine, data: dict[str, Any], t: float) -> list[Notification]:
    out = [Notification(tr.change, tr.alarm) for tr in e.evaluate_data(data, [], T0 + t)  # type: ignore[arg-type]
           if tr.change in ("firing", "resolved")]
    for n in out:
        worker.submit(n)
    return out


def sent(bodies: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(b["status"], b["alarm"]["id"], b["alarm"]["subject"]) for b in bodies]


def test_a_resolution_under_a_new_subject_does_not_overtake_its_firing_in_retry() -> None:
    clock = FakeMonotonic()
    e = AlarmEngine(default("md_array_degraded"), "n1", FakeClock(T0), id_prefix="r")
    with receiver(fail_first=1, fail_status=503) as rec:
        worker = NotifierWorker(section("webhook", rec.url, backoff_s=30.0, backoff_max_s=60.0, dedup_s=0.0),
                                "w", monotonic=clock)
        worker.start()
        (fired,) = notify(worker, e, arrays("md127", "degraded"), 0)
        assert fired.alarm.identity == f"md:{UUID}"
        wait_until(lambda: rec.attempts == 1)  # the firing failed; its retry is due in 30 s
        assert notify(worker, e, arrays("md126", "degraded"), 10) == []  # renumbered: same alarm
        (resolved,) = notify(worker, e, arrays("md126", "ok"), 20)
        assert (resolved.alarm.subject, resolved.alarm.identity) == ("md:md126", f"md:{UUID}")
        (again,) = notify(worker, e, arrays("md126", "degraded"), 30)  # a second episode of the array

        def three_sent() -> bool:
            clock.t += 31  # past any retry the failed firing waits for
            return len(rec.ok()) == 3

        wait_until(three_sent)
        worker.close()
    assert sent([r.json() for r in rec.ok()]) == [
        ("firing", "r-a1", "md:md127"), ("resolved", "r-a1", "md:md126"), ("firing", "r-a2", "md:md126")]
    assert again.alarm.identity == f"md:{UUID}"


def test_an_alarm_kept_by_its_subject_has_no_identity_of_its_own() -> None:
    """Rules without an ``identity``: the lane is the subject's, as before."""
    e = AlarmEngine(default("md_array_degraded"), "n1", FakeClock(T0))
    (tr,) = e.evaluate_data({"raid": [{"name": "md127", "uuid": None, "health": "degraded", "members": []}]},
                            [], T0)
    assert (tr.alarm.subject, tr.alarm.identity) == ("md:md127", "")
