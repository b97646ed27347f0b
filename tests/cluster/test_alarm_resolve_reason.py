"""How an alarm ended travels with its ``alarm_resolved`` event (a replay, or a dashboard between two
fetches, knows it from the frame alone), and the alarms screen groups rows by that reason, not by how
messages happen to end."""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from rigmon.agent.alarming import AlarmService
from rigmon.alarms.engine import AlarmEngine
from rigmon.cluster.alarm_board import AlarmRow, AlarmTracker, group_rows
from rigmon.cluster.alarm_events import with_alarm_events, with_endings
from rigmon.schema import Alarm, AlarmList, Event, EventValue
from tests.alarms.helpers import T0, FakeClock, restarted, rules

RAIL = '[[rule]]\nname = "rail"\nkind = "threshold"\nselect = "psu_rail.volts.min_volts"\nbelow = 11.7\n' \
       'subject = "psu"\nmessage = "rail {value:.2f} V"\n'


def rail(v: float) -> dict[str, Any]:
    return {"psu_rail": {"volts": {"mean_volts": v, "min_volts": v, "max_volts": v}}}


def _service(rule_text: str) -> tuple[AlarmEngine, AlarmService, list[tuple[str, str, dict[str, EventValue]]]]:
    events: list[tuple[str, str, dict[str, EventValue]]] = []
    engine = AlarmEngine(rules(rule_text), "n1", FakeClock(T0), id_prefix="r")
    service = AlarmService(engine, lambda kind, _sev, _subj, text, data: events.append((kind, text, data)))
    return engine, service, events


def test_the_resolved_event_says_how_the_alarm_ended() -> None:
    engine, service, events = _service(RAIL)
    service._publish(engine.evaluate_data(rail(11.3), [], T0))
    service._publish(engine.evaluate_data({}, [], T0 + 1))
    service._publish(engine.evaluate_data({}, [], T0 + 100))  # absent longer than absent_resolve_s
    (data,) = [d for kind, _, d in events if kind == "alarm_resolved"]
    assert data["reason"] == "unreported"
    assert all("reason" not in d for kind, _, d in events if kind != "alarm_resolved")


def test_a_pending_alarm_whose_subject_went_is_not_said_to_have_cleared() -> None:
    engine, service, events = _service(RAIL.replace('subject = "psu"', 'hold_s = 5.0\nsubject = "psu"'))
    service._publish(engine.evaluate_data(rail(11.3), [], T0))  # pending for its 5 s
    service._publish(engine.evaluate_data({}, [], T0 + 1))
    (text,) = [t for kind, t, _ in events if kind == "alarm_resolved"]
    assert text == "rail on psu no longer reported before its hold time"
    engine, service, events = _service(RAIL.replace('subject = "psu"', 'hold_s = 5.0\nsubject = "psu"'))
    service._publish(engine.evaluate_data(rail(11.3), [], T0))
    service._publish(engine.evaluate_data(rail(12.0), [], T0 + 1))
    (text,) = [t for kind, t, _ in events if kind == "alarm_resolved"]
    assert text == "rail on psu cleared before its hold time"


def test_a_replay_rebuilds_how_each_alarm_ended_from_its_resolved_event() -> None:
    # The replay's alarms come from the agent's events alone: an alarm whose subject went reads so
    # there too, as on the live dashboard, not as if it had cleared.
    engine, service, events = _service(RAIL)
    service._publish(engine.evaluate_data(rail(11.3), [], T0))
    service._publish(engine.evaluate_data({}, [], T0 + 1))
    service._publish(engine.evaluate_data({}, [], T0 + 100))
    tracker = AlarmTracker("n1")
    for n, (kind, text, data) in enumerate(events):
        tracker.apply(Event(id=f"e{n}", at=T0 + n, kind=kind, severity="info", subject="psu", message=text, data=data))
    (a,) = tracker.alarm_list().recent
    assert (a.state, a.resolve_reason, a.message) == ("resolved", "unreported", "rail 11.30 V (no longer reported)")
    assert a.message == engine.alarm_list().recent[0].message


def _firing(message: str, n: int = 1) -> Alarm:
    return Alarm(id=f"a{n}", rule=f"r{n}", rule_kind="state", severity="critical", node="n1", subject="gpu:3",
                 state="firing", message=message, started_at=T0, updated_at=T0, fired_at=T0)


def test_a_frames_resolved_event_gives_the_alarm_its_reason_before_the_next_fetch() -> None:
    alarms = AlarmList(node="n1", active=(_firing("rail 11.30 V"),), recent=())
    resolved = Event(id="e1", at=T0 + 5, kind="alarm_resolved", severity="info", subject="psu",
                     message="r1 resolved: rail 11.30 V (no longer reported)",
                     data={"alarm_id": "a1", "rule": "r1", "reason": "unreported"})
    (a,) = with_alarm_events(alarms, [resolved]).recent
    assert (a.state, a.resolve_reason, a.message) == ("resolved", "unreported", "rail 11.30 V (no longer reported)")
    # An older agent's event says nothing: the alarm is resolved, how is not known.
    older = Event(id="e2", at=T0 + 5, kind="alarm_resolved", severity="info", subject="psu", message="r1 resolved",
                  data={"alarm_id": "a1", "rule": "r1"})
    (a,) = with_alarm_events(alarms, [older]).recent
    assert (a.state, a.resolve_reason, a.message) == ("resolved", None, "rail 11.30 V")


def test_messages_that_end_alike_are_not_taken_for_a_reason() -> None:
    # Two firing alarms of one GPU whose own messages end in the same parenthesis: before, the row read
    # "GPU 3 is lost; Xid 79 (fell off the bus)", the parenthesis taken for how the alarms had ended.
    lost = AlarmRow("k", "n1", "node", _firing("GPU 3 is lost (fell off the bus)", 1))
    xid = AlarmRow("k", "n1", "node", _firing("Xid 79 (fell off the bus)", 2))
    (row,) = group_rows([lost, xid])
    assert row.message == "GPU 3 is lost (fell off the bus); Xid 79 (fell off the bus)"


def test_a_reason_this_dashboard_does_not_know_gets_a_neutral_ending() -> None:
    # A newer agent's alarm_resolved names a reason this dashboard has no ending for. Before, its alarms
    # ended with nothing said, as if they had cleared, and so did their row: "GPU 3 is lost; Xid 79".
    alarms = AlarmList(node="n1", active=(_firing("GPU 3 is lost", 1), replace(_firing("Xid 79", 2), rule_kind="event")),
                       recent=())
    events = [Event(id=f"e{n}", at=T0 + 5, kind="alarm_resolved", severity="info", subject="gpu:3",
                    message=f"r{n} resolved", data={"alarm_id": f"a{n}", "rule": f"r{n}", "reason": "maintenance"})
              for n in (1, 2)]
    recent = with_alarm_events(alarms, events).recent
    assert sorted((a.resolve_reason, a.message) for a in recent) == [
        ("maintenance", "GPU 3 is lost (ended: maintenance)"), ("maintenance", "Xid 79 (ended: maintenance)")]
    (row,) = group_rows([AlarmRow("k", "n1", "node", a) for a in recent])
    assert row.message == "GPU 3 is lost; Xid 79 (ended: maintenance)"
    # The agent's own record (the next fetch) ends in its own words (`test_a_newer_agents_own_ending_...`).
    # A replay, which rebuilds the alarms from the same events, says it too.
    tracker = AlarmTracker("n1")
    tracker.apply(Event(id="e0", at=T0, kind="alarm_firing", severity="critical", subject="gpu:3",
                        message="r1 firing: GPU 3 is lost", data={"alarm_id": "a1", "rule": "r1"}))
    tracker.apply(events[0])
    (a,) = tracker.alarm_list().recent
    assert (a.resolve_reason, a.message) == ("maintenance", "GPU 3 is lost (ended: maintenance)")


def test_a_newer_agents_own_ending_for_a_reason_this_dashboard_does_not_know_is_the_one_said() -> None:
    # Before: the agent's record of an alarm it ended for a reason this dashboard does not know ends in its
    # own words, and the dashboard added its neutral one after them: "GPU 3 is lost (under maintenance);
    # Xid 79 (under maintenance) (ended: maintenance)". The message the alarm had while active tells them.
    shown = AlarmList(node="n1", active=(_firing("GPU 3 is lost (fell off the bus)", 1), _firing("Xid 79", 2)),
                      recent=())

    def fetched(before: AlarmList, own: str = " (under maintenance)") -> tuple[Alarm, ...]:
        resolved = tuple(replace(a, state="resolved", resolved_at=T0 + 5, resolve_reason="maintenance",
                                 message=a.message + own) for a in shown.active)
        return with_endings(AlarmList(node="n1", active=(), recent=resolved), before).recent

    recent = fetched(shown)
    assert [a.message for a in recent] == ["GPU 3 is lost (fell off the bus) (under maintenance)",
                                           "Xid 79 (under maintenance)"]
    (row,) = group_rows([AlarmRow("k", "n1", "node", a) for a in recent])
    assert row.message == "GPU 3 is lost (fell off the bus); Xid 79 (under maintenance)"
    # The same after the frame's events had ended them here first, as the fetch they trigger finds them.
    events = [Event(id=f"e{n}", at=T0 + 5, kind="alarm_resolved", severity="info", subject="gpu:3",
                    message=f"r{n} resolved: {a.message} (under maintenance)",
                    data={"alarm_id": a.id, "rule": a.rule, "reason": "maintenance"})
              for n, a in enumerate(shown.active, 1)]
    by_events = with_alarm_events(shown, events)
    assert sorted(a.message for a in by_events.recent) == [a.message for a in recent]
    assert [a.message for a in fetched(by_events)] == [a.message for a in recent]
    # An agent that adds no ending of its own gets the neutral one, once, fetch after fetch.
    bare = fetched(shown, own="")
    assert [a.message for a in bare] == ["GPU 3 is lost (fell off the bus) (ended: maintenance)",
                                         "Xid 79 (ended: maintenance)"]
    again = with_endings(AlarmList(node="n1", active=(), recent=tuple(replace(a, message=s.message) for a, s in
                                                                    zip(bare, shown.active))),
                         AlarmList(node="n1", active=(), recent=bare)).recent
    assert [a.message for a in again] == [a.message for a in bare]
    # Never seen active, an ending cannot be told from the message's own parenthesis: the neutral one is added.
    (unseen,) = fetched(AlarmList(node="n1", active=(), recent=()))[:1]
    assert unseen.message == "GPU 3 is lost (fell off the bus) (under maintenance) (ended: maintenance)"


def test_a_replayed_alarm_that_an_agent_restart_carried_over_keeps_its_own_message() -> None:
    # The agent announces it "rail still firing after the agent restarted: rail 11.30 V": before, the replay
    # took all of that for the alarm's message, where the agent's /v1/alarms says "rail 11.30 V".
    old, service, events = _service(RAIL)
    service._publish(old.evaluate_data(rail(11.3), [], T0))
    new = AlarmEngine(rules(RAIL), "n1", FakeClock(T0 + 60), id_prefix="r2")
    restarted(old, new, T0 + 60)
    service.engine = new
    service._publish(new.evaluate_data(rail(11.3), [], T0 + 61))
    assert [kind for kind, _, _ in events] == ["alarm_firing", "alarm_firing"] and events[1][2].get("restored")
    tracker = AlarmTracker("n1")
    for n, (kind, text, data) in enumerate(events):
        tracker.apply(Event(id=f"e{n}", at=T0 + n, kind=kind, severity="critical", subject="psu", message=text,
                            data=data))
    (a,) = tracker.alarm_list().active
    assert a.message == new.alarm_list().active[0].message == "rail 11.30 V"
