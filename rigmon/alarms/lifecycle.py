"""Alarm lifecycle: pending, firing, resolved and acknowledged, per rule and subject.

`AlarmBook` turns observations ("rule R's condition holds for subject S at time T, value V")
into `Alarm` records and the transitions between them. It knows nothing about frames or
rule kinds beyond the few timing keys of `TrackedRule`, so node rules (the agent) and
cluster rules (the dashboard) share it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Literal, Protocol

import msgspec

from rigmon.alarms.memory import CarriedAlarm
from rigmon.alarms.observations import Observation, is_worse, merge_by_subject
from rigmon.schema import (
    RESOLVE_ENDINGS,
    Alarm,
    AlarmState,
    EventValue,
    ResolveReason,
    Severity,
)

Change = Literal["pending", "firing", "resolved", "acknowledged", "repeated"]


class TrackedRule(Protocol):
    """What the book needs of a rule."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def severity(self) -> Severity: ...
    @property
    def hold_s(self) -> float: ...
    @property
    def clear_hold_s(self) -> float: ...
    @property
    def absent_resolve_s(self) -> float: ...


class Transition(msgspec.Struct, frozen=True, gc=False):
    """An alarm changed: ``change`` is what happened, ``alarm`` the record after it.

    ``repeated``: a latched (event) alarm counted a further event while it fired (a second unclean
    shutdown, another Xid 79): its state stays, its ``count`` and message moved on. It is no new
    firing (not notified again), but what saves and shows alarms must follow it: a state file that
    kept the count before it made a third crash read "2 events since" after a restart.

    ``restored`` marks the decision about an alarm carried over from before an agent
    restart: ``firing`` when fresh readings confirm it (the episode continues, already
    notified), ``resolved`` when they do not.
    """

    change: Change
    alarm: Alarm
    previous: AlarmState | None
    restored: bool = False


def same_reading(a: EventValue, b: EventValue) -> bool:
    """Equal readings (``0 == 0.0``), a bool never equal to a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def ended(alarm: Alarm, at: float, reason: ResolveReason) -> Alarm:
    """``alarm`` resolved at ``at`` for ``reason``: its message keeps the worst it was, with the
    reason's ending (`RESOLVE_ENDINGS`) when the alarm ended without a fresh clear reading."""
    return msgspec.structs.replace(alarm, state="resolved", resolved_at=at, updated_at=at, resolve_reason=reason,
                                   message=alarm.message + RESOLVE_ENDINGS.get(reason, ""))


def _observed(alarm: Alarm, obs: Observation, now: float) -> Alarm:
    """``alarm`` after an active observation: value and message move only to a worse one
    (or, for readings without an order, stay those that fired it); ``value_now`` follows, and so
    does the subject when the alarm's rule keeps its alarms by an identity of their own (an md
    array renumbered md127 -> md126 by a reboot is the same alarm, now about ``md:md126``)."""
    if obs.subject != alarm.subject:
        # A state's message names the thing as it is now; a worst reading's keeps the name it was read under.
        message = obs.message if obs.worse is None else alarm.message
        alarm = msgspec.structs.replace(alarm, subject=obs.subject, labels=dict(obs.labels), message=message)
    if is_worse(obs.value, alarm.value, obs.worse):
        alarm = msgspec.structs.replace(alarm, value=obs.value, message=obs.message, worst_at=now)
    elif obs.restate and obs.message != alarm.message:
        alarm = msgspec.structs.replace(alarm, message=obs.message)
    if not same_reading(alarm.value_now, obs.value):
        alarm = msgspec.structs.replace(alarm, value_now=obs.value)
    return alarm


def repeated_message(count: int, since_at: float, latest: str) -> str:
    """The message of a latched (event) alarm that ``count`` events have kept firing since ``since_at``
    (Unix seconds), the newest saying ``latest``: ``Xid 79 ... (2 events since 2026-11-28 02:00:00 UTC)``.

    It said the newest event's message alone, under the first one's "since": a node's second
    unclean shutdown read as if it had happened when the first did, and as if it were the only one.
    """
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(since_at))
    # The latest event's own words first: an alarm row cut at 80 columns keeps what happened.
    return f"{latest} ({count} events since {stamp} UTC)"


class UnknownAlarm(KeyError):
    """No active or recent alarm has that id."""


class AlreadyResolved(ValueError):
    """The alarm is resolved; there is nothing left to acknowledge."""


class _Track(msgspec.Struct):
    alarm: Alarm
    hold_s: float
    clear_since: float | None = None
    absent_since: float | None = None
    latch_until: float | None = None


class _Carry(msgspec.Struct):
    alarm: Alarm
    clear_since: float | None = None
    absent_since: float | None = None


class AlarmBook:
    """Active alarms by (rule, subject: `Observation.identity`), and a bounded list of recently resolved ones.

    Args:
        node: node name put in every alarm.
        id_prefix: alarm ids are ``<id_prefix>-a<n>`` (the agent passes its run id).
        recent_limit: resolved alarms kept for /v1/alarms.
    """

    def __init__(self, node: str, id_prefix: str = "alarm", recent_limit: int = 200) -> None:
        self.node = node
        self.id_prefix = id_prefix
        self._n = 0
        self._active: dict[tuple[str, str], _Track] = {}
        self._recent: deque[Alarm] = deque(maxlen=recent_limit)
        # Alarms restored from before a restart, waiting for fresh readings to decide.
        self._carried: dict[tuple[str, str], _Carry] = {}
        # Restored alarms resolved by `restore` itself, to be announced at the first evaluation.
        self._restored: list[Transition] = []

    def take_restored(self) -> list[Transition]:
        """The resolutions `restore` decided without an evaluation (each handed out once)."""
        out, self._restored = self._restored, []
        return out

    def _end_restored(self, alarm: Alarm, at: float, reason: ResolveReason) -> None:
        """Resolve a restored alarm that cannot be taken over: recent list, and a transition for `take_restored`."""
        done = ended(alarm, at, reason)
        self._recent.appendleft(done)
        self._restored.append(Transition("resolved", done, alarm.state, restored=True))

    def rules_with_alarms(self) -> set[str]:
        """Names of the rules that have an active alarm, or one carried over a restart."""
        return {key[0] for key in self._active} | {key[0] for key in self._carried}

    def current(self, rule_name: str, identity: str) -> Alarm | None:
        """The rule's pending or firing alarm for ``identity`` (`Observation.identity`), if it has one."""
        track = self._active.get((rule_name, identity))
        return None if track is None else track.alarm

    def observe(self, rule: TrackedRule, observations: Iterable[Observation], now: float,
                complete: bool = True, latch_s: float | None = None) -> list[Transition]:
        """Apply one evaluation of ``rule``.

        Args:
            rule: the rule evaluated.
            observations: its condition for every subject it has data for.
            now: Unix seconds of the evaluation.
            complete: the observations cover every subject the rule can see; subjects
                of active alarms missing from them are absent (no data). False when the
                rule was not evaluated (its collector is not ok): absence is not counted.
            latch_s: for latched (event) alarms, how long one stays firing after its last
                event.

        Returns:
            The transitions, in order.
        """
        out: list[Transition] = []
        seen: set[str] = set()
        merged = merge_by_subject(observations)
        if self._carried:
            self._adopt(rule.name, merged)
        for obs in merged:
            seen.add(obs.identity)
            out.extend(self._apply(rule, obs, now, latch_s))
        for (rule_name, subject), track in list(self._active.items()):
            if rule_name != rule.name or subject in seen:
                continue
            if track.latch_until is not None:
                if now >= track.latch_until:
                    out.append(self._resolve((rule_name, subject), now, "quiet"))
                continue
            if not complete:
                continue
            if track.alarm.state == "pending":
                out.append(self._resolve((rule_name, subject), now, "unreported"))
                continue
            if track.absent_since is None:
                track.absent_since = now
            if now - track.absent_since >= rule.absent_resolve_s:
                out.append(self._resolve((rule_name, subject), now, "unreported"))
        if self._carried and complete:
            for key, carry in list(self._carried.items()):
                if key[0] != rule.name or key[1] in seen:
                    continue
                # A subject that fresh readings no longer report (a failed md member removed
                # from its array while the agent was down) is gone as it would be for a live
                # alarm: after the rule's absent_resolve_s. Rules that need a window of readings
                # report their subjects without a verdict meanwhile (`Observation.known`), so
                # they are not absent.
                if carry.absent_since is None:
                    carry.absent_since = now
                if now - carry.absent_since >= rule.absent_resolve_s:
                    out.append(self._settle(key, now, "unreported_after_restart"))
        return out

    def _adopt(self, rule_name: str, observations: list[Observation]) -> None:
        """Key restored alarms that were kept by their subject by the identity their subject has now.

        A state file written before a rule had an ``identity`` (or before the labels it names were
        read: an md member's ``device``) gives `restore` no identity for its alarms, so they wait
        under their subject. The first observation of that subject with an identity of its own
        takes such an alarm over (one that fires first, so a failed member listed twice under one
        name, with its re-added spare, keeps the alarm).
        """
        waiting = {key[1] for key in self._carried if key[0] == rule_name}
        if not waiting:
            return
        candidates = [o for o in observations if o.key and o.key != o.subject and o.subject in waiting]
        for obs in sorted(candidates, key=lambda o: not o.active):
            old, new = (rule_name, obs.subject), (rule_name, obs.key)
            if old in self._carried and new not in self._carried and new not in self._active:
                carry = self._carried[new] = self._carried.pop(old)
                # Its labels now, so that the next restart finds it by its identity.
                carry.alarm = msgspec.structs.replace(carry.alarm, labels=dict(obs.labels), identity=obs.key)

    def _apply(self, rule: TrackedRule, obs: Observation, now: float, latch_s: float | None) -> list[Transition]:
        key = (rule.name, obs.identity)
        track = self._active.get(key)
        if track is not None:
            track.absent_since = None
        if track is None and key in self._carried:
            self._carried[key].absent_since = None
            if obs.active:
                return [self._continue(key, obs, now)]
            if not obs.known:
                return []
            return [self._carried_clear(rule, key, now)]
        if not obs.active:
            if track is None or track.latch_until is not None or not obs.known:
                return []
            if track.alarm.state != "pending" and not same_reading(track.alarm.value_now, obs.value):
                # Held: the condition is clear, the alarm keeps its worst value; "now" follows.
                track.alarm = msgspec.structs.replace(track.alarm, value_now=obs.value, updated_at=now)
            if track.alarm.state == "pending":
                return [self._resolve(key, now, "cleared")]
            if track.clear_since is None:
                track.clear_since = now
            if now - track.clear_since >= rule.clear_hold_s:
                return [self._resolve(key, now, "cleared")]
            return []
        if track is None:
            self._n += 1
            alarm = Alarm(
                id=f"{self.id_prefix}-a{self._n}", rule=rule.name, rule_kind=rule.kind, severity=rule.severity,
                node=obs.node or self.node, subject=obs.subject, state="pending", message=obs.message, started_at=now,
                updated_at=now, value=obs.value, labels=dict(obs.labels), worst_at=now,
                value_now=None if obs.latch else obs.value, identity=obs.key,
            )
            track = _Track(alarm=alarm, hold_s=0.0 if obs.latch else rule.hold_s)
            self._active[key] = track
            out = []
            if track.hold_s > 0:
                out.append(Transition("pending", alarm, None))
            else:
                out.append(self._fire(track, now, None))
            if obs.latch:
                track.latch_until = now + (latch_s or 0.0)
            return out
        track.clear_since = None
        previous = track.alarm
        if obs.latch:
            track.latch_until = now + (latch_s or 0.0)
            # One alarm for the events of one latch, as for any alarm that goes on firing: its start stays,
            # and its message says how many events since then, and the latest.
            count = previous.count + 1
            track.alarm = msgspec.structs.replace(previous, value=obs.value, updated_at=now, count=count, worst_at=now,
                                              message=repeated_message(count, previous.started_at, obs.message))
            return [Transition("repeated", track.alarm, previous.state)]
        # The alarm keeps its worst observation (value and message) for the whole episode:
        # a rail that recovers from 11.26 V to 11.53 V must not make the alarm say 11.53 V.
        alarm = _observed(previous, obs, now)
        if previous.state == "pending" and now - previous.started_at >= track.hold_s:
            track.alarm = alarm
            return [self._fire(track, now, "pending")]
        if alarm != previous:
            track.alarm = msgspec.structs.replace(alarm, updated_at=now)
        return []

    def _continue(self, key: tuple[str, str], obs: Observation, now: float) -> Transition:
        """A restored alarm's condition still holds: its episode goes on (same id, start, ack)."""
        carry = self._carried.pop(key)
        alarm = msgspec.structs.replace(_observed(carry.alarm, obs, now), state="firing", updated_at=now)
        self._active[key] = _Track(alarm=alarm, hold_s=0.0)
        return Transition("firing", alarm, "firing", restored=True)

    def _carried_clear(self, rule: TrackedRule, key: tuple[str, str], now: float) -> Transition:
        """A restored alarm's condition is clear: it resolves once clear for the rule's ``clear_hold_s``.

        The clear hold runs from when it started before the restart (if it had) or from now;
        until it ends the alarm goes on firing, so a condition that comes and goes is not
        resolved and fired again (re-notified, a new id) by a restart.
        """
        carry = self._carried[key]
        clear_since = now if carry.clear_since is None else min(carry.clear_since, now)
        if now - clear_since >= rule.clear_hold_s:
            return self._settle(key, now, "cleared_after_restart")
        del self._carried[key]
        alarm = msgspec.structs.replace(carry.alarm, state="firing", updated_at=now)
        self._active[key] = _Track(alarm=alarm, hold_s=0.0, clear_since=clear_since)
        return Transition("firing", alarm, "firing", restored=True)

    def _settle(self, key: tuple[str, str], now: float, reason: ResolveReason) -> Transition:
        """A restored alarm is not confirmed by fresh readings: it is resolved."""
        alarm = ended(self._carried.pop(key).alarm, now, reason)
        self._recent.appendleft(alarm)
        return Transition("resolved", alarm, "firing", restored=True)

    def _fire(self, track: _Track, now: float, previous: AlarmState | None) -> Transition:
        track.alarm = msgspec.structs.replace(track.alarm, state="firing", fired_at=now, updated_at=now)
        return Transition("firing", track.alarm, previous)

    def _resolve(self, key: tuple[str, str], now: float, reason: ResolveReason) -> Transition:
        track = self._active.pop(key)
        previous = track.alarm.state
        alarm = ended(track.alarm, now, reason)
        if alarm.fired_at is not None:
            # A pending alarm that never fired is not worth keeping: it only says a
            # condition flickered for less than its hold time.
            self._recent.appendleft(alarm)
        return Transition("resolved", alarm, previous)

    def acknowledge(self, alarm_id: str, by: str, now: float) -> list[Transition]:
        """Record that the operator has seen an alarm.

        A latched (event) alarm is resolved by its acknowledgement: the event is over and
        has been seen. Acknowledging an already acknowledged alarm changes nothing.

        Raises:
            UnknownAlarm: no such id.
            AlreadyResolved: the alarm is resolved.
        """
        for key, track in self._active.items():
            if track.alarm.id != alarm_id:
                continue
            if track.alarm.acknowledged_at is not None:
                return []
            previous = track.alarm.state
            track.alarm = msgspec.structs.replace(track.alarm, acknowledged_at=now, acknowledged_by=by, updated_at=now)
            out = [Transition("acknowledged", track.alarm, previous)]
            if track.latch_until is not None:
                out.append(self._resolve(key, now, "acknowledged"))
            return out
        for carry in self._carried.values():
            if carry.alarm.id == alarm_id:
                if carry.alarm.acknowledged_at is None:
                    carry.alarm = msgspec.structs.replace(carry.alarm, acknowledged_at=now, acknowledged_by=by,
                                                      updated_at=now)
                    return [Transition("acknowledged", carry.alarm, carry.alarm.state, restored=True)]
                return []
        if any(a.id == alarm_id for a in self._recent):
            raise AlreadyResolved(alarm_id)
        raise UnknownAlarm(alarm_id)

    def get(self, alarm_id: str) -> Alarm | None:
        """An active or recent alarm by id."""
        for track in self._active.values():
            if track.alarm.id == alarm_id:
                return track.alarm
        for carry in self._carried.values():
            if carry.alarm.id == alarm_id:
                return carry.alarm
        return next((a for a in self._recent if a.id == alarm_id), None)

    def active(self) -> tuple[Alarm, ...]:
        """Pending and firing alarms, newest first."""
        return tuple(sorted((t.alarm for t in self._active.values()), key=lambda a: a.started_at, reverse=True))

    def recent(self) -> tuple[Alarm, ...]:
        """Resolved alarms that had fired, newest first."""
        return tuple(self._recent)

    def carried(self) -> tuple[Alarm, ...]:
        """Restored alarms still waiting for fresh readings, newest first."""
        return tuple(sorted((c.alarm for c in self._carried.values()), key=lambda a: a.started_at, reverse=True))

    def export(self) -> tuple[tuple[CarriedAlarm, ...], tuple[Alarm, ...]]:
        """The alarms to keep across a restart: those that fired (and are not resolved), and the recent list.

        Pending alarms are left out: their hold time starts again on fresh readings.
        """
        alarms = [CarriedAlarm(t.alarm, t.latch_until, t.clear_since) for t in self._active.values()
                  if t.alarm.fired_at is not None]
        alarms += [CarriedAlarm(c.alarm, clear_since=c.clear_since) for c in self._carried.values()]
        return tuple(alarms), tuple(self._recent)

    def restore(self, alarms: Iterable[CarriedAlarm], recent: Iterable[Alarm], rules: Mapping[str, TrackedRule],
                now: float, identity: Callable[[Alarm], str] | None = None) -> tuple[int, list[str]]:
        """Take over the alarms of a previous run (call before the first evaluation).

        A latched (event) alarm is active again at once until its ``latch_until`` (one that
        expired while the agent was down goes to the recent list). Any other alarm waits for
        the first fresh observation of its rule and subject: still active, its episode goes
        on (`Transition.restored`); clear, it resolves once clear for the rule's
        ``clear_hold_s`` (counted from before the restart if its clear hold had begun),
        going on firing until then; not reported by complete evaluations for the rule's
        ``absent_resolve_s``, it resolves as no longer reported. An alarm that cannot be
        taken over (its rule is no longer in force, its event expired while the agent was
        down, a second alarm of the same rule and subject) goes to the recent list as
        resolved, and its transition is handed out by `take_restored` so that it is
        announced like any other: a restored alarm never just vanishes.

        Args:
            alarms: as `export` gave them.
            recent: resolved alarms, newest first.
            rules: the rules in force by name; alarms of other rules are dropped.
            now: Unix seconds.
            identity: what the alarm is kept by besides its rule (`Observation.key`), worked out
                again from its labels, so a state file that holds only subjects (written before a
                rule had an ``identity``) is taken over; ``""`` or ``None``: its subject.

        Returns:
            How many alarms were taken over, and a note for each one dropped.
        """
        dropped: list[str] = []
        taken = 0
        for carried in alarms:
            alarm = carried.alarm
            derived = identity(alarm) if identity is not None else ""
            key = (alarm.rule, derived or alarm.subject)
            if identity is not None and alarm.identity != derived:
                # Saved before alarms carried their identity, or under a rule's earlier ``identity``.
                alarm = msgspec.structs.replace(alarm, identity=derived)
            rule = rules.get(alarm.rule)
            if rule is None:
                dropped.append(f"alarm {alarm.id}: rule {alarm.rule} is no longer in force")
                self._end_restored(alarm, now, "rule_removed")
                continue
            if key in self._active or key in self._carried:
                dropped.append(f"alarm {alarm.id}: another alarm of {alarm.rule} on {alarm.subject} was taken over")
                self._end_restored(alarm, now, "superseded")
                continue
            if carried.latch_until is not None:
                if carried.latch_until <= now:
                    dropped.append(f"alarm {alarm.id}: expired while the agent was down")
                    self._end_restored(alarm, carried.latch_until, "quiet")
                    continue
                self._active[key] = _Track(alarm=alarm, hold_s=0.0, latch_until=carried.latch_until)
            else:
                self._carried[key] = _Carry(alarm=alarm, clear_since=carried.clear_since)
            taken += 1
        room = (self._recent.maxlen or 0) - len(self._recent)
        for alarm in list(recent)[:max(0, room)]:
            self._recent.append(alarm)
        return taken, dropped
