"""A node's alarm list with the alarm transitions its frames announced since the last fetch."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from rigmon.schema import Alarm, AlarmList, Event

#: Alarm states an ``alarm_*`` event of a frame moves an alarm to, in their order: an event
#: moves an alarm forward only (an old frame's ``alarm_pending`` never undoes a firing).
_EVENT_STATES: dict[str, int] = {"alarm_pending": 0, "alarm_firing": 1, "alarm_resolved": 2}
_STATE_ORDER: dict[str, int] = {"pending": 0, "firing": 1, "resolved": 2}
#: The kinds of event that announce an alarm transition.
ALARM_EVENT_KINDS = frozenset(_EVENT_STATES)


def with_alarm_events(alarms: AlarmList, events: Iterable[Event]) -> AlarmList:
    """``alarms`` (the node's last /v1/alarms answer) with the transitions its frames announced
    since: an alarm that fired or resolved, or a new one, counts at once, not only after the
    fetch the event triggers (which a busy agent may answer late or not at all).

    Only forward moves of alarms the list does not already show resolved: the fetch that
    follows stays the authority (acknowledgements, messages, rule kinds).
    """
    active = {a.id: a for a in alarms.active}
    resolved = {a.id for a in alarms.recent}
    recent = list(alarms.recent)
    changed = False
    for event in events:
        order = _EVENT_STATES.get(event.kind)
        alarm_id = event.data.get("alarm_id")
        if order is None or not isinstance(alarm_id, str) or alarm_id in resolved:
            continue
        old = active.get(alarm_id)
        if old is not None and _STATE_ORDER[old.state] >= order:
            continue
        rule = str(event.data.get("rule", old.rule if old is not None else ""))
        if old is None:
            if event.kind == "alarm_resolved":
                continue
            severity = event.data.get("severity")
            text = event.message.split(": ", 1)[-1]
            old = Alarm(id=alarm_id, rule=rule, rule_kind="", node=alarms.node, subject=event.subject,
                        severity=severity if severity in ("info", "warning", "critical") else event.severity,  # type: ignore[arg-type]
                        state="pending", message=text, started_at=event.at, updated_at=event.at)
        if event.kind == "alarm_resolved":
            del active[alarm_id]
            resolved.add(alarm_id)
            recent.insert(0, msgspec.structs.replace(old, state="resolved", resolved_at=event.at, updated_at=event.at))
        else:
            state = "firing" if event.kind == "alarm_firing" else "pending"
            active[alarm_id] = msgspec.structs.replace(
                old, state=state, updated_at=event.at,
                fired_at=event.at if state == "firing" and old.fired_at is None else old.fired_at)
        changed = True
    if not changed:
        return alarms
    return msgspec.structs.replace(alarms, active=tuple(active.values()), recent=tuple(recent))
