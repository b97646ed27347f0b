"""The text of a resolved notification says where the reading is now, from what the real alarm
lifecycle puts in a resolved transition (``value_now``), and stays honest where it has no
fresh reading (no longer reported, decided over a restart, an event)."""

from __future__ import annotations

import json
from typing import Any

from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.lifecycle import Transition
from rigmon.notify.payload import Notification, command_environment, ntfy_request, slack_payload, summary, \
    webhook_payload
from tests.alarms.helpers import T0, FakeClock, default, event, rules


def rail(v: float) -> dict[str, Any]:
    return {"psu_rail": {"volts": {"mean_volts": v, "min_volts": v, "max_volts": v}}}


def resolved_of(transitions: list[Transition]) -> Notification:
    (t,) = [t for t in transitions if t.change == "resolved"]
    return Notification("resolved", t.alarm)


def critical_engine() -> tuple[AlarmEngine, FakeClock]:
    clock = FakeClock(T0)
    return AlarmEngine(default("psu_rail_low_critical"), "v100-a", clock, id_prefix="r"), clock


def test_a_rail_that_recovers_says_where_it_is_now_and_how_low_it_was() -> None:
    engine, clock = critical_engine()
    seen: list[Transition] = []
    for i, v in enumerate([11.40, 11.255, 11.46, 11.90, 11.92]):
        seen += engine.evaluate_data(rail(v), [], T0 + i)
    for i in range(61):  # clear_hold_s = 60
        seen += engine.evaluate_data(rail(11.92), [], T0 + 5 + i)
    n = resolved_of(seen)
    assert summary(n) == ("[RESOLVED] v100-a psu: now 11.920 V; was: 12 V rail minimum 11.255 V is below 11.5 V: "
                          "GPUs fall off the bus here")
    body = webhook_payload(n)
    assert body["value_now"] == 11.92 and body["alarm"]["value"] == 11.255
    assert body["text"] == summary(n) and slack_payload(n)["text"].endswith(summary(n))
    assert ntfy_request(n)[0].decode() == summary(n)
    env = command_environment(n)
    assert env["RIGMON_ALARM_VALUE_NOW"] == "11.92" and env["RIGMON_ALARM_VALUE"] == "11.255"
    assert json.loads(env["RIGMON_ALARM_JSON"])["value_now"] == 11.92


def test_a_firing_notification_is_unchanged_and_carries_its_reading() -> None:
    engine, _ = critical_engine()
    (t,) = engine.evaluate_data(rail(11.42), [], T0)
    n = Notification("firing", t.alarm)
    assert summary(n) == "[CRITICAL] v100-a psu: 12 V rail minimum 11.420 V is below 11.5 V: GPUs fall off the bus here"
    assert webhook_payload(n)["value_now"] == 11.42


def test_a_rail_no_longer_reported_gives_its_last_reading_not_a_now() -> None:
    engine, _ = critical_engine()
    seen = engine.evaluate_data(rail(11.3), [], T0)
    seen += engine.evaluate_data(rail(11.45), [], T0 + 1)
    for i in range(2, 70):  # absent_resolve_s = 60
        seen += engine.evaluate_data({}, [], T0 + i)
    n = resolved_of(seen)
    assert summary(n) == ("[RESOLVED] v100-a psu: no longer reported (last 11.450 V); was: 12 V rail minimum "
                          "11.300 V is below 11.5 V: GPUs fall off the bus here")
    assert webhook_payload(n)["value_now"] is None
    assert command_environment(n)["RIGMON_ALARM_VALUE_NOW"] == ""


def test_resolved_over_a_restart_says_so_without_a_stale_reading() -> None:
    before, _ = critical_engine()
    before.evaluate_data(rail(11.3), [], T0)
    memory = before.export_memory()
    after, _ = critical_engine()
    after.restore_memory(memory, T0 + 10)
    assert after.evaluate_data({}, [], T0 + 10) == []  # not reported since the restart: absent from here
    n = resolved_of(after.evaluate_data({}, [], T0 + 10 + 1000))  # ... for longer than absent_resolve_s
    assert summary(n) == ("[RESOLVED] v100-a psu: not reported since the agent restarted; was: 12 V rail minimum "
                          "11.300 V is below 11.5 V: GPUs fall off the bus here")
    assert webhook_payload(n)["value_now"] is None
    quick = rules('[[rule]]\nname = "rail"\nkind = "threshold"\nselect = "psu_rail.volts.min_volts"\nbelow = 11.7\n'
                  'subject = "psu"\nmessage = "rail {value:.2f} V"\n')
    before = AlarmEngine(quick, "v100-a", FakeClock(T0), id_prefix="r")
    before.evaluate_data(rail(11.3), [], T0)
    after = AlarmEngine(quick, "v100-a", FakeClock(T0), id_prefix="r")
    after.restore_memory(before.export_memory(), T0 + 10)
    n = resolved_of(after.evaluate_data(rail(12.0), [], T0 + 11))
    assert summary(n) == "[RESOLVED] v100-a psu: clear after the agent restarted; was: rail 11.30 V"


def test_other_rule_kinds_read_as_an_operator_would() -> None:
    # A state: the new state.
    state = rules('[[rule]]\nname = "md"\nkind = "state"\nselect = "raid[*].health"\none_of = ["degraded"]\n'
                  'subject = "md:{name}"\nmessage = "array {name} is {value}"\n')
    engine = AlarmEngine(state, "n1", FakeClock(T0))
    seen = engine.evaluate_data({"raid": [{"name": "md0", "health": "degraded"}]}, [], T0)
    seen += engine.evaluate_data({"raid": [{"name": "md0", "health": "clean"}]}, [], T0 + 1)
    assert summary(resolved_of(seen)) == "[RESOLVED] n1 md:md0: now clean; was: array md0 is degraded"
    # An event alarm: no reading, it ends by acknowledgement or a quiet spell.
    xid = default("gpu_xid_fatal")
    engine = AlarmEngine(xid, "n1", FakeClock(T0))
    ev = [event("xid", "gpu:0", "Xid 79: GPU has fallen off the bus", xid=79)]
    (fired,) = engine.evaluate_data({}, ev, T0)
    n = resolved_of(engine.acknowledge(fired.alarm.id, "alice", T0 + 5))
    assert summary(n) == "[RESOLVED] n1 gpu:0: acknowledged by alice; was: Xid 79: GPU has fallen off the bus"
    assert webhook_payload(n)["value_now"] is None
    engine = AlarmEngine(xid, "n1", FakeClock(T0))
    engine.evaluate_data({}, ev, T0)
    engine.evaluate_data({}, [event("xid", "gpu:0", "Xid 79 again", xid=79)], T0 + 1)
    n = resolved_of(engine.evaluate_data({}, [], T0 + 4000))  # resolve_after_s = 3600
    assert summary(n) == ("[RESOLVED] n1 gpu:0: no new event; was: 2 events since 2023-11-14 22:13:20 UTC; "
                          "the latest: Xid 79 again")


def test_a_counter_and_a_staleness_resolve_in_their_own_words() -> None:
    from rigmon.schema import Alarm
    base = dict(id="a1", severity="warning", node="n1", state="resolved", started_at=T0, updated_at=T0)
    counter = Alarm(rule="replays", rule_kind="counter", subject="gpu:0", value=12, value_now=0,
                    message="GPU 0 PCIe replays rose by 12 in 60 s", **base)  # type: ignore[arg-type]
    assert summary(Notification("resolved", counter)) == \
        "[RESOLVED] n1 gpu:0: now +0 in its window; was: GPU 0 PCIe replays rose by 12 in 60 s"
    stale = Alarm(rule="silent", rule_kind="staleness", subject="collector:gpu", value=130.2, value_now=0.4,
                  message="collector gpu has not reported for 130 s (limit 120 s)", **base)  # type: ignore[arg-type]
    assert summary(Notification("resolved", stale)) == \
        "[RESOLVED] n1 collector:gpu: reporting again; was: collector gpu has not reported for 130 s (limit 120 s)"
