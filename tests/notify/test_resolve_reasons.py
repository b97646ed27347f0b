"""Every way an alarm ends gives its record a ``resolve_reason``, and a resolved notification says
where the alarm stands from that reason, not from how its message happens to end: the real
lifecycle (agent, restart, dashboard) through each reason, to the record, to the notification text.
Records of agents before the field still read by their message's ending."""

from __future__ import annotations

from typing import Any

import msgspec

from rigmon.alarms.cluster import ClusterAlarms, NodeView
from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.lifecycle import Transition
from rigmon.alarms.memory import CarriedAlarm, EngineMemory
from rigmon.alarms.rules import Rule
from rigmon.cluster.alarm_events import split_at_restart
from rigmon.notify.payload import Notification, resolution, summary, webhook_payload
from rigmon.schema import RESOLVE_REASONS, Alarm, AlarmList, decode
from tests.alarms.helpers import T0, FakeClock, default, event, rules

RAIL = '[[rule]]\nname = "rail"\nkind = "threshold"\nselect = "psu_rail.volts.min_volts"\nbelow = 11.7\n' \
       'subject = "psu"\nmessage = "rail {value:.2f} V"\n'
XID = default("gpu_xid_fatal")
XID79 = [event("xid", "gpu:0", "Xid 79: GPU has fallen off the bus", xid=79)]


def rail(v: float) -> dict[str, Any]:
    return {"psu_rail": {"volts": {"mean_volts": v, "min_volts": v, "max_volts": v}}}


def engine(rule_set: tuple[Rule, ...] | None = None) -> AlarmEngine:
    return AlarmEngine(rules(RAIL) if rule_set is None else rule_set, "n1", FakeClock(T0), id_prefix="r")


def resolved(transitions: list[Transition]) -> Alarm:
    (t,) = [t for t in transitions if t.change == "resolved"]
    return t.alarm


def text(a: Alarm) -> str:
    return summary(Notification("resolved", a))


def restarted(memory: EngineMemory, rule_set: tuple[Rule, ...] | None = None) -> AlarmEngine:
    after = engine(rule_set)
    after.restore_memory(memory, T0 + 10)
    return after


def test_cleared_and_unreported() -> None:
    e = engine()
    e.evaluate_data(rail(11.3), [], T0)
    a = resolved(e.evaluate_data(rail(12.0), [], T0 + 1))
    assert a.resolve_reason == "cleared" and text(a) == "[RESOLVED] n1 psu: now 12.00 V; was: rail 11.30 V"
    e = engine()
    e.evaluate_data(rail(11.3), [], T0)
    assert e.evaluate_data({}, [], T0 + 1) == []  # absent from here ...
    a = resolved(e.evaluate_data({}, [], T0 + 100))  # ... for longer than absent_resolve_s (60)
    assert a.resolve_reason == "unreported"
    assert text(a) == "[RESOLVED] n1 psu: no longer reported (last 11.30 V); was: rail 11.30 V"
    # A pending alarm that ends is not notified, but says why too.
    slow = rules(RAIL.replace('below = 11.7\n', 'below = 11.7\nhold_s = 30\n'))
    e = engine(slow)
    e.evaluate_data(rail(11.3), [], T0)
    assert resolved(e.evaluate_data(rail(12.0), [], T0 + 1)).resolve_reason == "cleared"


def test_an_event_alarm_ends_quiet_or_acknowledged() -> None:
    e = engine(XID)
    (fired,) = e.evaluate_data({}, XID79, T0)
    a = resolved(e.acknowledge(fired.alarm.id, "alice", T0 + 5))
    assert a.resolve_reason == "acknowledged"
    assert text(a) == "[RESOLVED] n1 gpu:0: acknowledged by alice; was: Xid 79: GPU has fallen off the bus"
    e = engine(XID)
    e.evaluate_data({}, XID79, T0)
    a = resolved(e.evaluate_data({}, [], T0 + 4000))  # resolve_after_s = 3600
    assert a.resolve_reason == "quiet" and text(a) == "[RESOLVED] n1 gpu:0: no new event; was: Xid 79: GPU has " \
                                                      "fallen off the bus"


def test_reasons_decided_over_an_agent_restart() -> None:
    before = engine()
    before.evaluate_data(rail(11.3), [], T0)
    memory = before.export_memory()
    a = resolved(restarted(memory).evaluate_data(rail(12.0), [], T0 + 11))
    assert a.resolve_reason == "cleared_after_restart"
    assert text(a) == "[RESOLVED] n1 psu: clear after the agent restarted; was: rail 11.30 V"
    after = restarted(memory)
    after.evaluate_data({}, [], T0 + 10)
    a = resolved(after.evaluate_data({}, [], T0 + 100))
    assert a.resolve_reason == "unreported_after_restart"
    assert text(a) == "[RESOLVED] n1 psu: not reported since the agent restarted; was: rail 11.30 V"
    # Its rule is gone: no fresh reading, so no "now 11.30 V" (the reading from before the restart).
    other = rules(RAIL.replace('name = "rail"', 'name = "other"'))
    a = resolved(restarted(memory, other).evaluate_data(rail(12.0), [], T0 + 11))
    assert a.resolve_reason == "rule_removed" and a.message == "rail 11.30 V (rule no longer in force after the " \
                                                               "agent restarted)"
    assert text(a) == "[RESOLVED] n1 psu: its rule is no longer in force (after the agent restarted); was: rail 11.30 V"
    assert webhook_payload(Notification("resolved", a))["value_now"] is None
    # Two alarms of one rule and subject in the file: the second is superseded by the first.
    (carried,) = memory.alarms
    twin = CarriedAlarm(msgspec.structs.replace(carried.alarm, id="old-a9"))
    a = resolved(restarted(EngineMemory(alarms=(carried, twin))).evaluate_data(rail(11.3), [], T0 + 11))
    assert a.resolve_reason == "superseded" and a.id == "old-a9"
    assert text(a).startswith("[RESOLVED] n1 psu: superseded by another alarm of its rule and subject")
    assert resolution(a)[0] is False
    # An event alarm whose latch ran out while the agent was down: a quiet spell.
    xid = engine(XID)
    xid.evaluate_data({}, XID79, T0)
    after = engine(XID)
    after.restore_memory(xid.export_memory(), T0 + 5000)
    a = resolved(after.evaluate_data({}, [], T0 + 5000))
    assert a.resolve_reason == "quiet" and text(a).startswith("[RESOLVED] n1 gpu:0: no new event; was: Xid 79")


def test_the_dashboards_ends() -> None:
    # A node the dashboard no longer follows: its cluster alarms are no longer reported.
    cluster = ClusterAlarms(unreachable_hold_s=0.0)
    down = NodeView(node="a", connected=False, last_received_at=T0, last_taken_at=T0, error="connection refused")
    cluster.evaluate([down], {}, T0, peers=False)
    a = resolved(cluster.evaluate([], {}, T0 + 1, peers=False))
    assert a.resolve_reason == "unreported" and text(a).startswith("[RESOLVED] a node:a: no longer reported")
    # An agent that restarted without an alarm (the dashboard's live and replay view).
    firing = Alarm(id="r-a1", rule="rail", rule_kind="threshold", severity="warning", node="n1", subject="psu",
                   state="firing", message="rail 11.30 V", started_at=T0, updated_at=T0, fired_at=T0, value=11.3,
                   value_now=11.3)
    (a,) = split_at_restart([firing], T0 + 100).ended
    assert a.resolve_reason == "restarted_without" and a.message == "rail 11.30 V (agent restarted without it)"
    assert text(a) == "[RESOLVED] n1 psu: its agent restarted without it; was: rail 11.30 V"


def test_every_reason_has_a_way_to_end() -> None:
    """The reasons above are all there are: a new one gets a test here."""
    assert RESOLVE_REASONS == {"cleared", "unreported", "quiet", "acknowledged", "cleared_after_restart",
                               "unreported_after_restart", "rule_removed", "superseded", "restarted_without"}


def test_a_rule_whose_message_ends_like_a_lifecycle_ending_is_not_taken_for_it() -> None:
    for ending in (" (no longer reported)", " (clear after the agent restarted)",
                   " (not reported since the agent restarted)"):
        tricky = rules(RAIL.replace('message = "rail {value:.2f} V"', f'message = "rail {{value:.2f}} V{ending}"'))
        e = engine(tricky)
        e.evaluate_data(rail(11.3), [], T0)
        a = resolved(e.evaluate_data(rail(12.0), [], T0 + 1))
        assert text(a) == f"[RESOLVED] n1 psu: now 12.00 V; was: rail 11.30 V{ending}"
        assert webhook_payload(Notification("resolved", a))["value_now"] == 12.0


def test_an_older_agents_record_decodes_and_reads_by_its_message() -> None:
    old = {"id": "r-a1", "rule": "rail", "rule_kind": "threshold", "severity": "warning", "node": "n1",
           "subject": "psu", "state": "resolved", "message": "rail 11.30 V (no longer reported)",
           "started_at": T0, "updated_at": T0 + 100, "fired_at": T0, "resolved_at": T0 + 100, "value": 11.3,
           "value_now": 11.3}
    listed = decode(AlarmList, msgspec.json.encode({"node": "n1", "active": [], "recent": [old]}))
    (a,) = listed.recent
    assert a.resolve_reason is None
    assert text(a) == "[RESOLVED] n1 psu: no longer reported (last 11.30 V); was: rail 11.30 V"
    cleared = msgspec.structs.replace(a, message="rail 11.30 V", value_now=12.0)
    assert text(cleared) == "[RESOLVED] n1 psu: now 12.00 V; was: rail 11.30 V"
    # A newer agent's reason this one does not know: the message's ending still tells.
    newer = msgspec.structs.replace(a, resolve_reason="melted")
    assert text(newer) == text(a)
