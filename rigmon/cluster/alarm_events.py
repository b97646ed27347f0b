"""A node's alarm list with the alarm transitions its frames announced since the last fetch, and its
alarms that an agent restart ended."""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterable
from dataclasses import dataclass

import msgspec

from rigmon.schema import RESOLVE_ENDINGS, RESOLVE_REASONS, Alarm, AlarmList, Event

#: Alarm states an ``alarm_*`` event of a frame moves an alarm to, in their order: an event
#: moves an alarm forward only (an old frame's ``alarm_pending`` never undoes a firing).
_EVENT_STATES: dict[str, int] = {"alarm_pending": 0, "alarm_firing": 1, "alarm_resolved": 2}
_STATE_ORDER: dict[str, int] = {"pending": 0, "firing": 1, "resolved": 2}
#: The event of a latched (event) alarm that counted a further event while it fired: its message and
#: count move on, its state does not.
REPEATED = "alarm_repeated"
#: The kinds of event that announce an alarm transition.
ALARM_EVENT_KINDS = frozenset(_EVENT_STATES) | {REPEATED}
#: Said of an alarm of an agent run that the agent's next run did not take over.
RESTARTED_WITHOUT = "agent restarted without it"


def with_alarm_events(alarms: AlarmList, events: Iterable[Event]) -> AlarmList:
    """``alarms`` (the node's last /v1/alarms answer) with the transitions its frames announced
    since: an alarm that fired or resolved, or a new one, counts at once, not only after the
    fetch the event triggers (which a busy agent may answer late or not at all), and an event
    alarm that counted a further event says so (`repeated_by`), listed from that repeat when the
    list does not hold it yet (`repeated_alarm`).

    Only forward moves of alarms the list does not already show resolved: the fetch that
    follows stays the authority (acknowledgements, messages, rule kinds).
    """
    active = {a.id: a for a in alarms.active}
    resolved = {a.id for a in alarms.recent}
    recent = list(alarms.recent)
    changed = False
    for event in events:
        alarm_id = event.data.get("alarm_id")
        if event.kind == REPEATED:
            if not isinstance(alarm_id, str) or alarm_id in resolved:
                continue
            # An alarm this list does not show yet (it fired after the last fetch, or before the first one
            # this dashboard made) is listed from its repeat at once: the next fetch is up to 30 s away.
            old = active.get(alarm_id)
            new = repeated_by(old, event) if old is not None else repeated_alarm(event, alarms.node)
            if new is not None:
                active[new.id] = new
                changed = True
            continue
        order = _EVENT_STATES.get(event.kind)
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
            recent.insert(0, resolved_by(old, event))
        else:
            state = "firing" if event.kind == "alarm_firing" else "pending"
            active[alarm_id] = msgspec.structs.replace(
                old, state=state, updated_at=event.at,
                fired_at=event.at if state == "firing" and old.fired_at is None else old.fired_at)
        changed = True
    if not changed:
        return alarms
    return msgspec.structs.replace(alarms, active=tuple(active.values()), recent=tuple(recent))


def event_text(event: Event, rule: str, change: str) -> str:
    """The alarm's message an ``alarm_<change>`` event of ``rule`` carries: its text without the agent's
    ``"<rule> <change>: "``, or, for a firing an agent restart carried over (``data.restored``), without its
    ``"<rule> still firing after the agent restarted: "`` (rigmon.agent.alarming words it so)."""
    said = "still firing after the agent restarted" if change == "firing" and event.data.get("restored") else change
    return event.message.removeprefix(f"{rule} {said}: ")


def repeated_by(alarm: Alarm, event: Event) -> Alarm | None:
    """``alarm`` as its ``alarm_repeated`` event moved it on: the message, count and value of its latest
    event (the agent's ``"<rule> repeated: <message>"``), its state as it was; ``None`` when the event
    counts no more events than ``alarm`` already does (an old frame's, or one a fetch already took in)."""
    count = event.data.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count <= alarm.count:
        return None
    text = event_text(event, str(event.data.get("rule", alarm.rule)), "repeated")
    return msgspec.structs.replace(alarm, message=text, count=count, value=event.data.get("value", alarm.value),
                                   updated_at=event.at)


def repeated_alarm(event: Event, node: str, rule_kind: str = "") -> Alarm | None:
    """The alarm an ``alarm_repeated`` event tells of, for a list that does not hold it yet: its rule,
    severity, state (``pending`` or ``firing``), value, count and message (``<rule> repeated: <message>``) as
    the event carries them, started when the message's ``(N events since <UTC time> UTC)`` says (the first
    of its events: `rigmon.alarms.lifecycle.repeated_message`), else at the event; firing since then. ``None``
    for an event without an alarm id or a state an active alarm has.

    Args:
        event: the ``alarm_repeated`` event.
        node: the node's name, put in the alarm.
        rule_kind: the rule's kind, which the events do not carry (``""`` live; a replay says ``"replay"``).
    """
    alarm_id, state = event.data.get("alarm_id"), event.data.get("state")
    if not isinstance(alarm_id, str) or state not in ("pending", "firing"):
        return None
    rule = str(event.data.get("rule", ""))
    severity = event.data.get("severity")
    text = event_text(event, rule, "repeated")
    since = first_event_at(text)
    started_at = since if since is not None and since <= event.at else event.at
    count = event.data.get("count")
    return Alarm(id=alarm_id, rule=rule, rule_kind=rule_kind, node=node, subject=event.subject,
                 severity=severity if severity in ("info", "warning", "critical") else event.severity,  # type: ignore[arg-type]
                 state=state, message=text, started_at=started_at, updated_at=event.at,  # type: ignore[arg-type]
                 value=event.data.get("value"), fired_at=started_at if state == "firing" else None,
                 count=count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1)


def first_event_at(message: str) -> float | None:
    """When the first event of a repeated alarm came (Unix seconds), as its message ends
    ``(3 events since 2026-11-28 02:00:00 UTC)``; ``None`` when it does not end so."""
    head, sep, tail = message.rpartition(" events since ")
    stamp = tail.removesuffix(" UTC)")
    if not sep or stamp == tail or not head.rpartition("(")[2].isdigit():
        return None
    try:
        return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")))
    except ValueError:
        return None


def resolve_ending(reason: str) -> str:
    """What the message of an alarm resolved for ``reason`` ends with: its `RESOLVE_ENDINGS` (``""`` for
    one that ended on a fresh clear reading), or, for a reason this dashboard does not know (a newer
    agent's), a neutral ending naming it, `` (ended: <reason>)``, so that it never reads as cleared."""
    if reason in RESOLVE_REASONS:
        return RESOLVE_ENDINGS.get(reason, "")
    return f" (ended: {reason})" if reason else " (ended)"


def own_ending(before: str, after: str) -> str:
    """What an agent added to an alarm's message ``before`` when it resolved it, its message ``after``:
    a parenthesis of its own (`` (drained by the operator)``), or ``""``."""
    added = after[len(before):] if after.startswith(before) else ""
    return added if added.startswith(" (") and added.endswith(")") else ""


def with_ending(alarm: Alarm, before: str | None) -> Alarm:
    """``alarm``, resolved for a reason this dashboard does not know (a newer agent's), with one word on
    how it ended: the agent's own ending when its message carries one (``before``, its message while it
    was active, is the message without it), else the neutral `resolve_ending`. Any other alarm as it is.

    Without ``before`` (an alarm this dashboard never saw active) an ending of the agent's cannot be
    told from a parenthesis of the message itself (``GPU 3 is lost (fell off the bus)``): the neutral
    one is added, so that the alarm never reads as cleared.
    """
    reason = alarm.resolve_reason
    if reason is None or reason in RESOLVE_REASONS:
        return alarm
    ending = resolve_ending(reason)
    if alarm.message.endswith(ending) or before is not None and own_ending(before, alarm.message):
        return alarm
    return msgspec.structs.replace(alarm, message=alarm.message + ending)


def with_endings(answer: AlarmList, before: AlarmList | None) -> AlarmList:
    """``answer`` (a node's /v1/alarms) with each alarm resolved for a reason this dashboard does not
    know ending in one word on how it ended (`with_ending`), judged against ``before``, the list shown
    until now: the alarm's message while it was active, or as this dashboard already ended it."""
    earlier: dict[str, str] = {}
    decided: dict[str, str] = {}
    if before is not None:
        earlier = {a.id: a.message for a in before.active}
        for a in before.recent:
            decided[a.id] = a.message
            if a.resolve_reason is not None and a.resolve_reason not in RESOLVE_REASONS:
                earlier.setdefault(a.id, a.message.removesuffix(resolve_ending(a.resolve_reason)))
    recent = tuple(a if decided.get(a.id) == a.message else with_ending(a, earlier.get(a.id)) for a in answer.recent)
    if recent == answer.recent:
        return answer
    return msgspec.structs.replace(answer, recent=recent)


def resolved_by(alarm: Alarm, event: Event) -> Alarm:
    """``alarm`` as its ``alarm_resolved`` event ended it: how (an older agent's event does not say)
    and the ending the agent's record of it has: for a reason this dashboard does not know, the
    agent's own when the event's text carries one, else a neutral one (`with_ending`)."""
    reason = event.data.get("reason")
    if not isinstance(reason, str):
        return msgspec.structs.replace(alarm, state="resolved", resolved_at=event.at, updated_at=event.at)
    ended = msgspec.structs.replace(alarm, state="resolved", resolved_at=event.at, updated_at=event.at,
                                    resolve_reason=reason)
    if reason not in RESOLVE_REASONS:
        # "<rule> resolved: <the agent's record's message>", as the agent words it.
        told = event.message.removeprefix(f"{event.data.get('rule', alarm.rule)} resolved: ")
        ending = own_ending(alarm.message, told)
        return with_ending(msgspec.structs.replace(ended, message=alarm.message + ending), alarm.message)
    ending = resolve_ending(reason)
    message = alarm.message if alarm.message.endswith(ending) else alarm.message + ending
    return msgspec.structs.replace(alarm, state="resolved", resolved_at=event.at, updated_at=event.at,
                                   resolve_reason=reason, message=message)


def ended_by_restart(alarm: Alarm, at: float) -> Alarm:
    """``alarm`` resolved at ``at`` because its agent restarted without it, saying so."""
    return msgspec.structs.replace(alarm, state="resolved", resolved_at=at, updated_at=at,
                                   resolve_reason="restarted_without",
                                   message=alarm.message + RESOLVE_ENDINGS["restarted_without"])


@dataclass(frozen=True, slots=True)
class RestartSplit:
    """What becomes of a node's active alarms when its agent restarts (`split_at_restart`).

    Attributes:
        kept: alarms that go on: the new run restored them, or they are its own.
        ended: firing alarms of the old run the new run does not know, resolved (`ended_by_restart`).
        dropped: pending alarms of the old run: gone without an end (the new run holds them again
            under new ids if their condition lasts).
    """

    kept: tuple[Alarm, ...]
    ended: tuple[Alarm, ...]
    dropped: tuple[Alarm, ...]


def split_at_restart(active: Iterable[Alarm], at: float, events: Iterable[Event] = (),
                     agent_start: float | None = None) -> RestartSplit:
    """A node's ``active`` alarms after its agent restarted (a frame of a new run, taken at ``at``
    with ``events``, from an agent started at ``agent_start``).

    Its pending alarms are gone: an agent keeps only alarms that had fired across a restart
    (their fate comes as events of the new run); a pending one's hold starts again under a new
    id, and no event ends the old one. A firing alarm goes on only when the new run restored it:
    the run's ``alarm_state_restored`` event says when the state it took over was saved, and an
    alarm that fired after that (or every one, with no such event: a state directory wiped, a crash
    before the first save) is unknown to the new run; it ends at ``at``, saying so. Alarms started
    at or after ``agent_start`` are the new run's own (its /v1/alarms answer came before its
    frames) and are kept.
    """
    saved_at: float | None = None
    for event in events:
        value = event.data.get("saved_at")
        if event.kind == "alarm_state_restored" and isinstance(value, (int, float)) and not isinstance(value, bool):
            saved_at = float(value)
    kept: list[Alarm] = []
    ended: list[Alarm] = []
    dropped: list[Alarm] = []
    for alarm in active:
        if agent_start is not None and alarm.started_at >= agent_start:
            kept.append(alarm)
        elif alarm.state == "pending":
            dropped.append(alarm)
        elif saved_at is None or alarm.fired_at is None or alarm.fired_at > saved_at:
            ended.append(ended_by_restart(alarm, at))
        else:
            kept.append(alarm)
    return RestartSplit(tuple(kept), tuple(ended), tuple(dropped))
