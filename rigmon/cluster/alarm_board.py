"""The alarms of every followed node for the dashboard: rows to show, critical news, alarms rebuilt from events.

Node alarms come from each agent's /v1/alarms (kept in its `NodeStore`), cluster alarms
from `ClusterStore.rules`; `board_view` puts both in one list. `CriticalWatch` tells which
critical alarms are new since the last look (for the toast and the bell). `AlarmTracker`
rebuilds a node's alarms from the ``alarm_*`` events of its frames, for a replay, whose
bundle holds frames but no /v1/alarms answers.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import msgspec

from rigmon.alarms.cluster import alarm_node_key
from rigmon.alarms.values import number
from rigmon.cluster.alarm_events import (REPEATED, event_text, repeated_alarm, repeated_by, resolve_ending, resolved_by,
                                         split_at_restart)
from rigmon.cluster.node_store import NodeStore
from rigmon.cluster.node_view import node_state
from rigmon.cluster.recording_end import ENDED
from rigmon.cluster.store import ClusterStore
from rigmon.schema import RESOLVE_REASONS, Alarm, AlarmList, AlarmState, Event, Severity

AlarmSource = Literal["node", "cluster"]

#: Order of severities on the alarms screen, worst first.
SEVERITY_RANK: dict[str, int] = {"critical": 0, "warning": 1, "info": 2}
#: Order of states: firing before pending.
STATE_RANK: dict[str, int] = {"firing": 0, "pending": 1, "resolved": 2}
#: Resolved alarms shown at most.
RECENT_SHOWN = 200


@dataclass(frozen=True, slots=True)
class AlarmRow:
    """One alarm as the alarms screen lists it.

    Attributes:
        key: the node store the alarm belongs to (its URL); for a cluster alarm, the store
            of the node it is about, or ``""`` when no store has that name.
        node: node name.
        source: ``node`` (the agent's rules) or ``cluster`` (the dashboard's rules).
        alarm: the alarm record.
    """

    key: str
    node: str
    source: AlarmSource
    alarm: Alarm
    also: tuple[Alarm, ...] = ()
    """Other alarms of the same incident shown in this row (same node and subject, episodes
    overlapping): the rail warning under its critical, the Xid 79 with the GPU it lost."""
    as_of: float | None = None
    """For a node's own alarm that may no longer be current (the node is stale or unreachable,
    its alarms could not be fetched, or in a replay its recording ended before the cursor): when
    its list was last the node's word (Unix s); ``None`` while it is current."""
    as_of_why: str = ""
    """Why the alarm is as of ``as_of``: ``node unreachable``, ``node stale``, ``alarms not fetched``,
    ``recording ended``."""

    @property
    def alarms(self) -> tuple[Alarm, ...]:
        """Every alarm of the row, the shown one first."""
        return (self.alarm, *self.also)

    @property
    def message(self) -> str:
        """The row's text: the shown alarm's message, then what the others add (an escalation
        from a warning, the Xid that came with a lost GPU)."""
        joined = [o.message for o in self.also if o.message and not _escalation(o, self.alarm)]
        # A reason every joined alarm ends with ("(agent restarted without it)") is said once, at the end;
        # so is the ending of a reason this dashboard does not know (a newer agent's), whatever the
        # joined messages end with: the agent's own, or this dashboard's word for it (`with_ending`).
        reason = _ending(self.alarm)
        unknown = self.alarm.resolve_reason is not None and self.alarm.resolve_reason not in RESOLVE_REASONS
        if not (reason and (unknown or joined and all(m.endswith(reason) for m in joined))):
            reason = ""
        text = self.alarm.message.removesuffix(reason)
        for other in self.also:
            if _escalation(other, self.alarm):
                if other.started_at < self.alarm.started_at:
                    since = time.strftime("%H:%M:%S", time.gmtime(other.started_at))
                    text += f" (a {other.severity} since {since} UTC)"
            elif other.message and other.message.removesuffix(reason) not in text:
                text += f"; {other.message.removesuffix(reason)}"
        return text + reason

    @property
    def row_key(self) -> str:
        """Unique on the screen: alarm ids are unique per agent run, cluster ids per dashboard."""
        return f"{self.source}:{self.key}:{self.alarm.id}"


@dataclass(frozen=True, slots=True)
class AlarmBoardView:
    """Everything the alarms screen draws.

    Attributes:
        active: pending and firing alarms, worst first.
        recent: resolved alarms, newest first.
        errors: node name to why its alarms are unknown (agent unreachable, alarms disabled).
        firing: rows of ``active`` whose shown alarm is firing, by that alarm's severity (the
            worst of the row): what the screen lists, one row per incident (`group_rows`).
        notes: what the alarms cannot tell (in a replay: clock skew).
        firing_as_of: how many of those firing rows are what a node last said, not current
            (`AlarmRow.as_of`: the node is stale or unreachable, its alarms not fetched, or its
            recording ended).
        firing_alarms: firing alarms in those rows (more than the rows when a row joins several).
    """

    active: tuple[AlarmRow, ...]
    recent: tuple[AlarmRow, ...]
    errors: dict[str, str] = field(default_factory=dict)
    firing: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    firing_as_of: int = 0
    firing_alarms: int = 0


def _active_order(row: AlarmRow) -> tuple[int, int, float, str]:
    a = row.alarm
    return (STATE_RANK[a.state], SEVERITY_RANK[a.severity], -(a.fired_at or a.started_at), row.node)


def board_view(cluster: ClusterStore, notes: tuple[str, ...] = (),
               ended: Mapping[str, float] | None = None) -> AlarmBoardView:
    """Node and cluster alarms of every followed node, in screen order, with ``notes`` (see
    `AlarmBoardView`).

    Args:
        cluster: the stores and the cluster rules.
        notes: what the alarms cannot tell (a replay's `Replay.notes`).
        ended: in a replay, the nodes whose recording ended before the cursor, by store key, with
            their last frame's time (`rigmon.cluster.recording_end.recording_ends`): their alarms are
            as of it, though the node itself reads neither stale nor unreachable.
    """
    ended = ended or {}
    active: list[AlarmRow] = []
    recent: list[AlarmRow] = []
    errors: dict[str, str] = {}
    # Two followed agents of one name are told apart as the cluster rules' alarms tell them
    # (``node01 (http://10.0.0.2:9871)``), or their alarms would read as one node's.
    names = cluster.rule_names()
    for store in cluster.nodes.values():
        name = names.get(store.key, store.name)
        # An unreachable node has its own alarm (node_unreachable); only say more for the others.
        if store.alarm_error is not None and store.connected_now():
            errors[name] = store.alarm_error
        if store.alarm_list is None:
            continue
        as_of, why = _as_of(store, ended.get(store.key))
        active += [AlarmRow(store.key, name, "node", a, as_of=as_of, as_of_why=why)
                   for a in store.alarm_list.active]
        recent += [AlarmRow(store.key, name, "node", a) for a in store.alarm_list.recent]
    # A cluster alarm is about the node of its key (two agents may share a name).
    for alarm in cluster.rules.active():
        active.append(AlarmRow(_store_key(cluster, alarm), alarm.node, "cluster", alarm))
    for alarm in cluster.rules.recent():
        recent.append(AlarmRow(_store_key(cluster, alarm), alarm.node, "cluster", alarm))
    active = group_rows(active)
    active.sort(key=_active_order)
    recent = group_rows(recent)
    recent.sort(key=lambda r: -(r.alarm.resolved_at or r.alarm.updated_at))
    # Counted as listed: a row of several alarms (a rail warning under its critical) is one firing row.
    firing: dict[str, int] = {}
    as_of = alarms = 0
    for row in active:
        if row.alarm.state == "firing":
            firing[row.alarm.severity] = firing.get(row.alarm.severity, 0) + 1
            as_of += row.as_of is not None
            alarms += sum(1 for a in row.alarms if a.state == "firing")
    return AlarmBoardView(tuple(active), tuple(recent[:RECENT_SHOWN]), errors, firing, notes, as_of, alarms)


def _as_of(store: NodeStore, ended_at: float | None) -> tuple[float | None, str]:
    """Since when ``store``'s alarms are only what the node last said, and why (`AlarmRow.as_of`,
    ``as_of_why``); ``(None, "")`` while they are current. ``ended_at``: its recording's last frame
    when the replay's cursor is past it (the node is not stale, but nothing of it comes after)."""
    state = node_state(store.state(), store.error)
    if state != "live":
        return store.alarms_at, f"node {state}"
    if ended_at is not None:
        return ended_at, ENDED
    if store.alarm_error is not None:
        return store.alarms_at, "alarms not fetched"
    return None, ""


def _store_key(cluster: ClusterStore, alarm: Alarm) -> str:
    """The store a cluster alarm is about; ``""`` when no followed node has its key."""
    key = alarm_node_key(alarm)
    return key if key in cluster.nodes else ""


def _ending(alarm: Alarm) -> str:
    """What the end of a resolved ``alarm`` added to its message (``" (agent restarted without it)"``),
    or ``""``: by its `Alarm.resolve_reason`; for a reason this dashboard does not know, the ending its
    message carries (`with_ending` gave it one: the agent's own or the neutral `resolve_ending`); an
    older agent's alarm, which has no reason, by its message."""
    if alarm.state != "resolved":
        return ""
    reason = alarm.resolve_reason
    if reason is None:
        return _end_reason(alarm.message)
    ending = resolve_ending(reason)
    if reason in RESOLVE_REASONS or alarm.message.endswith(ending):
        return ending
    return _end_reason(alarm.message)


def _end_reason(message: str) -> str:
    """The parenthesis ``message`` ends with, with the space before it (``" (agent restarted
    without it)"``), or ``""``."""
    start = message.rfind(" (")
    if start < 0 or not message.endswith(")") or "(" in message[start + 2:] or ")" in message[start + 2:-1]:
        return ""
    return message[start:]


def _escalation(lower: Alarm, upper: Alarm) -> bool:
    """Whether ``upper`` is ``lower`` escalated: two limits of one reading (threshold rules, or
    rules named alike but for their last word: ``psu_rail_low_warning``/``_critical``) at
    different severities."""
    if lower.severity == upper.severity:
        return False
    if lower.rule_kind == upper.rule_kind == "threshold":
        return True
    return "_" in lower.rule and lower.rule.rsplit("_", 1)[0] == upper.rule.rsplit("_", 1)[0]


def _lead_order(alarm: Alarm) -> tuple[int, int, bool, bool, float]:
    """Which alarm of a group is shown: firing before pending, the worst severity, a state
    before an event (the GPU lost before the Xid that announced it), one with a measured reading
    before one without (the rail minimum's volts before the ADC's latch flag: the row's figure says
    how bad, even cut at 80 columns), the earliest."""
    return (STATE_RANK[alarm.state], SEVERITY_RANK[alarm.severity], alarm.rule_kind == "event",
            number(alarm.value) is None, alarm.started_at)


def _overlap(a: Alarm, b: Alarm) -> bool:
    """Whether two alarms' episodes overlap in time (an active one has not ended)."""
    a_end = a.resolved_at if a.resolved_at is not None else float("inf")
    b_end = b.resolved_at if b.resolved_at is not None else float("inf")
    return a.started_at <= b_end and b.started_at <= a_end


def group_rows(rows: Sequence[AlarmRow]) -> list[AlarmRow]:
    """One row per incident: alarms of one node's subject whose episodes overlap (a rail
    warning and the critical it escalated to, an Xid 79 and the lost GPU it announced, the
    NVLink and PCIe counters of one badly seated GPU) become one row showing the worst.

    Rows keep their first member's place; the shown alarm is chosen by `_lead_order`.
    """
    groups: list[list[AlarmRow]] = []
    by_subject: dict[tuple[str, str, str, str], list[list[AlarmRow]]] = {}
    for row in rows:
        key = (row.key, row.source, row.alarm.node, row.alarm.subject)
        target = next((g for g in by_subject.get(key, []) if all(_overlap(row.alarm, r.alarm) for r in g)), None)
        if target is None:
            target = []
            groups.append(target)
            by_subject.setdefault(key, []).append(target)
        target.append(row)
    out = []
    for group in groups:
        if len(group) == 1:
            out.append(group[0])
            continue
        members = sorted((r.alarm for r in group), key=_lead_order)
        out.append(replace(group[0], alarm=members[0], also=tuple(members[1:])))
    return out


class CriticalWatch:
    """Which critical alarms started firing since the last look (toast and bell once each).

    Alarms already firing when a node's first alarm list arrives are not news: the
    operator sees them on the screen, and a dashboard started during an incident should
    not ring for each of them.

    An alarm is news once: one that stops firing and fires again with the same identity
    (its row key, rule, subject and start: a replay sought back before it and forward over
    it again) was announced already.
    """

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._listed: set[str] = set()
        self._announced: set[tuple[str, str, str, float]] = set()

    def news(self, active: Sequence[AlarmRow], listed_keys: Iterable[str]) -> list[AlarmRow]:
        """Critical firing alarms not seen firing at the previous call.

        Args:
            active: the active alarms now (`AlarmBoardView.active`).
            listed_keys: nodes whose alarm list is known now.
        """
        first = set(listed_keys) - self._listed
        self._listed |= first
        out: list[AlarmRow] = []
        now_seen: set[str] = set()
        for row in active:
            if row.alarm.severity != "critical" or row.alarm.state != "firing":
                continue
            now_seen.add(row.row_key)
            identity = (row.row_key, row.alarm.rule, row.alarm.subject, row.alarm.started_at)
            if row.row_key in self._seen or (row.source == "node" and row.key in first) \
                    or identity in self._announced:
                continue
            self._announced.add(identity)
            out.append(row)
        self._seen = now_seen
        return out


#: Change named by an alarm event's kind (``alarm_firing`` -> ``firing``).
_CHANGES: dict[str, AlarmState | Literal["acknowledged", "repeated"]] = {
    "alarm_pending": "pending", "alarm_firing": "firing", "alarm_resolved": "resolved",
    "alarm_acknowledged": "acknowledged", REPEATED: "repeated",
}


class AlarmTracker:
    """A node's alarms rebuilt from its ``alarm_*`` events (what a replay has of them).

    The agent emits one event per transition with ``data`` holding ``alarm_id``, ``rule``,
    ``severity``, ``state`` and ``value``, and the message ``"<rule> <change>: <text>"``; an
    ``alarm_repeated`` one (an event alarm counted a further event) adds its ``count``.
    The rule's kind is not in the events (``rule_kind`` is ``"replay"``).

    Args:
        node: node name put in every alarm.
        recent_limit: resolved alarms kept.
    """

    def __init__(self, node: str, recent_limit: int = RECENT_SHOWN) -> None:
        self.node = node
        self.recent_limit = recent_limit
        self._active: dict[str, Alarm] = {}
        self._recent: list[Alarm] = []

    def apply(self, event: Event) -> None:
        """Take one event into account (events that are not alarm transitions are ignored)."""
        change = _CHANGES.get(event.kind)
        alarm_id = event.data.get("alarm_id")
        if change is None or not isinstance(alarm_id, str):
            return
        rule = str(event.data.get("rule", ""))
        severity = event.data.get("severity")
        sev: Severity = severity if severity in ("info", "warning", "critical") else event.severity  # type: ignore[assignment]
        text = event_text(event, rule, change)
        old = self._active.get(alarm_id)
        if old is None and change == "repeated":
            # A repeat whose firing came before the replay's first event: firing since its first event, as
            # the live dashboard lists an alarm it learns of from a repeat (`repeated_alarm`).
            first = repeated_alarm(event, self.node, "replay")
            if first is not None:
                self._active[alarm_id] = first
            return
        if old is None:
            old = Alarm(id=alarm_id, rule=rule, rule_kind="replay", severity=sev, node=self.node,
                        subject=event.subject, state="pending", message=text, started_at=event.at,
                        updated_at=event.at)
        value = event.data.get("value", old.value)
        if change == "repeated":
            # Its message and count move on, its state does not (`repeated_by`, as the live dashboard's).
            new = repeated_by(old, event) or old
        elif change == "acknowledged":
            new = msgspec.structs.replace(old, acknowledged_at=event.at, updated_at=event.at)
        elif change == "resolved":
            # How it ended, as the live dashboard takes it from the same event (`resolved_by`).
            new = resolved_by(old, event)
        else:
            new = msgspec.structs.replace(old, state=change, message=text, value=value, updated_at=event.at,
                          fired_at=event.at if change == "firing" and old.fired_at is None else old.fired_at)
        if new.state == "resolved":
            self._active.pop(alarm_id, None)
            self._recent.insert(0, new)
            del self._recent[self.recent_limit:]
        else:
            self._active[alarm_id] = new

    def restarted(self, at: float, events: Iterable[Event] = ()) -> None:
        """The node's agent restarted (a frame of a new run, taken at ``at`` with ``events``): its
        alarms that the new run did not take over end (see `split_at_restart`)."""
        split = split_at_restart(self._active.values(), at, events)
        self._active = {a.id: a for a in split.kept}
        self._recent[:0] = split.ended
        del self._recent[self.recent_limit:]

    def alarm_list(self) -> AlarmList:
        """The alarms as /v1/alarms would list them (read-only: no acknowledging a replay)."""
        return AlarmList(node=self.node, active=tuple(self._active.values()), recent=tuple(self._recent))
