"""The node rule engine: evaluates rules against frames and keeps the alarms they raise.

Pure: no I/O, and time comes from the frame (``taken_at``) or the injected clock, so the
same engine runs in the agent on every frame, in ``rigmon check`` and in table-driven tests.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from rigmon.alarms.conditions import counter, state_condition, threshold, trend, worse
from rigmon.alarms.event_reports import XidReports
from rigmon.alarms.frame_reads import FrameReads
from rigmon.alarms.lifecycle import AlarmBook, Transition, same_reading
from rigmon.alarms.observations import Observation
from rigmon.alarms.memory import EngineMemory, FirstSeen, RestoreSummary, TrendBucket, TrendSeries
from rigmon.alarms.quiet import counter_update, first_seen_update, staleness_update, state_test
from rigmon.alarms.record_fields import message_fields
from rigmon.alarms.rule_state import RuleState, stood_still
from rigmon.alarms.rules import (
    CounterRule,
    EventRule,
    Rule,
    StalenessRule,
    StateRule,
    ThresholdRule,
    TrendRule,
    to_table,
)
from rigmon.alarms.selector import Match, Selector, field_value, frame_view, parse_selector
from rigmon.alarms.templates import Template
from rigmon.alarms.walk import WalkCarry
from rigmon.alarms.values import number, same_value
from rigmon.clock import Clock
from rigmon.schema import Alarm, AlarmList, Event, EventValue, Frame


class AlarmEngine:
    """Node rules over frames, with the alarms they raise.

    Args:
        rules: the rules in force.
        node: node name put in every alarm.
        clock: time for acknowledgements and for frames evaluated without a time.
        id_prefix: alarm ids are ``<id_prefix>-a<n>``.
        recent_limit: resolved alarms kept.
        intervals: seconds between runs of each collector, by name: staleness rules with
            ``max_intervals`` allow a subject whose ``key`` label names a collector that
            many of its intervals (the agent passes its collectors' ``interval_s``).
    """

    def __init__(self, rules: Sequence[Rule], node: str, clock: Clock, id_prefix: str = "alarm",
                 recent_limit: int = 200, intervals: Mapping[str, float] | None = None) -> None:
        self.rules = tuple(rules)
        self.node = node
        self.clock = clock
        self.intervals: dict[str, float] = dict(intervals or {})
        self.book = AlarmBook(node, id_prefix, recent_limit)
        self._state: dict[str, RuleState] = {r.name: RuleState() for r in self.rules}
        self._selectors = {r.name: r.selector for r in self.rules}
        #: For state rules that keep no memory between frames (``equals``, ``one_of``,
        #: ``not_one_of``), whether a reading is in the rule's bad state.
        self._stateless: dict[str, Callable[[EventValue], bool]] = {
            r.name: state_test(r) for r in self.rules
            if isinstance(r, StateRule) and (r.equals is not None or r.one_of or r.not_one_of)}
        #: Leave out clear observations of rules without alarms (see `evaluate_data`); tests
        #: switch it off to check that it changes nothing.
        self.skip_quiet = True
        #: What `evaluate_data` needs of each rule, in order, worked out once: its kind (as far as
        #: the fast paths tell them apart), selector and stateless test.
        self._plan: tuple[tuple[Rule, str, Any, Callable[[EventValue], bool] | None], ...] = tuple(
            (r, _kind(r), self._selectors[r.name], self._stateless.get(r.name)) for r in self.rules)
        #: What the selectors' walks found in the previous frame (see `WalkCarry`).
        self._carry = WalkCarry()
        #: Per event rule, the Xids counted: another source's report of one is not counted again.
        self._xid_reports = {r.name: XidReports() for r in self.rules if isinstance(r, EventRule)}
        self._subjects = {r.name: Template(r.subject) for r in self.rules}
        #: Rules whose alarms are kept apart by an ``identity`` other than their subject's text.
        self._identities = {r.name: Template(r.identity) for r in self.rules if r.identity}
        self._messages = {r.name: Template(r.message) for r in self.rules}
        #: The frame being evaluated: a message naming fields of the record its match sits in reads them here.
        self._reads: FrameReads | None = None
        #: Threshold rules' ``unknown_select``, parsed once.
        self._unknown_selectors: dict[str, Selector] = {
            r.name: parse_selector(r.unknown_select) for r in self.rules
            if isinstance(r, ThresholdRule) and r.unknown_select
        }
        self._params: dict[str, dict[str, Any]] = {
            r.name: {k: v for k, v in to_table(r).items() if k not in ("message", "subject", "identity", "description")}
            for r in self.rules
        }

    @property
    def rule_names(self) -> tuple[str, ...]:
        """Names of the rules in force."""
        return tuple(r.name for r in self.rules)

    def evaluate(self, frame: Frame, now: float | None = None) -> list[Transition]:
        """Evaluate every rule against one frame.

        Args:
            frame: the newest frame (its ``events`` are those since the previous one).
            now: Unix seconds; default the frame's ``taken_at``.

        Returns:
            The alarm transitions this frame caused, rule by rule.
        """
        # The selectors read the frame's records as they are (`frame_view`): converting the
        # frame to plain data first (`frame_data`) cost as much as all the rules together.
        return self.evaluate_data(frame_view(frame), frame.events, frame.taken_at if now is None else now)

    def evaluate_data(self, data: Mapping[str, Any], events: Sequence[Event], now: float) -> list[Transition]:
        """Evaluate every rule against frame data (`frame_data` or `frame_view`) and the events since the last call.

        The seam for readings whose record types a build does not have yet, and for tests.
        """
        # Restored alarms that the restore itself resolved (a rule no longer in force, an event
        # expired while the agent was down) are announced with the first evaluation.
        out: list[Transition] = self.book.take_restored()
        reads = FrameReads(data, self._carry)  # rules that watch the same reading share what is read of it
        self._reads = reads
        try:
            return self._evaluate_rules(reads, events, now, out)
        finally:
            self._reads = None  # the frame is not kept past its evaluation

    def _evaluate_rules(self, reads: FrameReads, events: Sequence[Event], now: float,
                        out: list[Transition]) -> list[Transition]:
        """`evaluate_data`'s walk over the rules, adding their transitions to ``out``."""
        data = reads.data
        # A rule without an active or carried alarm only needs its active observations: the
        # book does nothing with a clear one for a subject it has no alarm for. Most rules,
        # most of the time, see only healthy subjects: their subjects and messages are not
        # rendered and no observation is built. (Evaluating rule R changes only R's alarms,
        # so the set taken here holds for every rule when its turn comes.)
        alarmed = self.book.rules_with_alarms() if self.skip_quiet else None
        for rule, kind, selector, test in self._plan:
            if kind is _EVENT:
                if events or alarmed is None or rule.name in alarmed:
                    event_rule = cast(EventRule, rule)
                    obs = list(self._events(event_rule, events))
                    out.extend(self.book.observe(rule, obs, now, latch_s=event_rule.resolve_after_s))
                continue
            if kind is _COLLECTOR_STATE:
                collector = cast(StateRule, rule).collector
                status = field_value(field_value(data.get("collectors"), collector), "state")
                if status != "ok":
                    out.extend(self.book.observe(rule, [], now, complete=False))
                    continue
            assert selector is not None
            quiet = alarmed is not None and rule.name not in alarmed
            if quiet and test is not None:
                # A state rule that keeps no memory: its values alone say whether any subject is active.
                if not any(map(test, reads.values(selector))):
                    continue
            if quiet and kind is _STALENESS:
                # As for counters: subjects and values count the frames a timestamp stood
                # still; only one older than the least limit needs its labels.
                stale = cast(StalenessRule, rule)
                candidates = staleness_update(stale, self._state[rule.name], reads.subject_values(selector), now)
                if not candidates:
                    continue
                matches = reads.matches(selector)
                observations = [o for i, at, frames in candidates
                                if (o := self._stale_obs(stale, matches[i], at, frames, now, True)) is not None]
                if observations:
                    out.extend(self.book.observe(rule, observations, now))
                continue
            if quiet and kind is _COUNTER:
                # Histories are kept by subject: a quiet counter needs subjects and values, not
                # matches with labels. Updating a history again with the same value changes
                # nothing, so the rising ones are then observed from their matches as usual.
                rising = counter_update(cast(CounterRule, rule), self._state[rule.name], reads.subject_values(selector),
                                        now)
                if not rising:
                    continue
                matches = reads.matches(selector)
                matches = [matches[i] for i in rising]
            elif quiet and kind is _FIRST_SEEN:
                # As for counters: only a reading below its first value needs its match.
                below = first_seen_update(self._state[rule.name], reads.subject_values(selector))
                if not below:
                    continue
                matches = reads.matches(selector)
                matches = [matches[i] for i in below]
            else:
                matches = reads.matches(selector)
            observations = [o for o in self._observe(rule, matches, now, quiet) if o is not None]
            if observations or not quiet:
                out.extend(self.book.observe(rule, observations, now))
        return out

    def acknowledge(self, alarm_id: str, by: str, now: float | None = None) -> list[Transition]:
        """Acknowledge an alarm (see `AlarmBook.acknowledge`)."""
        return self.book.acknowledge(alarm_id, by, self.clock.time() if now is None else now)

    def active(self) -> tuple[Alarm, ...]:
        """Pending and firing alarms, newest first."""
        return self.book.active()

    def in_force(self) -> tuple[Alarm, ...]:
        """Pending and firing alarms and those carried over an agent restart that fresh readings
        have not decided yet (they go on firing until then), newest first."""
        return tuple(sorted(self.active() + self.book.carried(), key=lambda a: a.started_at, reverse=True))

    def recent(self) -> tuple[Alarm, ...]:
        """Resolved alarms that fired, newest first."""
        return self.book.recent()

    def export_memory(self) -> EngineMemory:
        """What this engine should remember across a restart (see `rigmon.alarms.memory`)."""
        trends: list[TrendSeries] = []
        first_seen: list[FirstSeen] = []
        for rule in self.rules:
            state = self._state[rule.name]
            if isinstance(rule, TrendRule):
                trends.extend(
                    TrendSeries(rule=rule.name, subject=subject, bucket_s=rule.bucket_s,
                                buckets=tuple(TrendBucket(int(b[0]), b[1], int(b[2])) for b in buckets))
                    for subject, buckets in state.buckets.items() if buckets)
            elif isinstance(rule, StateRule) and rule.below_first_seen:
                first_seen.extend(FirstSeen(rule=rule.name, subject=subject, value=value)
                                  for subject, value in state.first_seen.items())
        alarms, recent = self.book.export()
        return EngineMemory(trends=tuple(trends), first_seen=tuple(first_seen), alarms=alarms, recent=recent)

    def restore_memory(self, memory: EngineMemory, now: float | None = None) -> RestoreSummary:
        """Take over the memory of a previous run; call before the first evaluation.

        Memory of rules no longer in force, or whose kind or ``bucket_s`` changed, is dropped
        (and named in the summary); trend buckets older than the rule's window are dropped.

        Args:
            memory: as `export_memory` gave it (possibly from another agent run).
            now: Unix seconds; default the clock's.
        """
        at = self.clock.time() if now is None else now
        by_name = {r.name: r for r in self.rules}
        dropped: list[str] = []
        trends = 0
        for series in memory.trends:
            rule = by_name.get(series.rule)
            if not isinstance(rule, TrendRule) or rule.bucket_s != series.bucket_s:
                dropped.append(f"trend {series.rule}/{series.subject}: rule no longer in force or changed")
                continue
            kept = [[float(b.index), b.total, float(b.count)] for b in series.buckets
                    if b.count > 0 and (b.index + 1) * rule.bucket_s > at - rule.window_s]
            if kept:
                self._state[rule.name].buckets[series.subject] = deque(kept)
                trends += 1
        first = 0
        for seen in memory.first_seen:
            rule = by_name.get(seen.rule)
            if not isinstance(rule, StateRule) or not rule.below_first_seen:
                dropped.append(f"first-seen {seen.rule}/{seen.subject}: rule no longer in force or changed")
                continue
            self._state[rule.name].first_seen.setdefault(seen.subject, seen.value)
            first += 1
        alarms, notes = self.book.restore(memory.alarms, memory.recent, by_name, at,
                                          lambda a: self._identity(a.rule, a.labels))
        dropped.extend(notes)
        return RestoreSummary(trend_series=trends, first_seen=first, alarms=alarms,
                              recent=min(len(memory.recent), len(self.book.recent())), dropped=tuple(dropped))

    def alarm_list(self, control: bool = False) -> AlarmList:
        """The ``/v1/alarms`` record.

        Its ``active`` alarms include those carried over an agent restart that fresh readings
        have not decided yet: they go on firing until then (see `AlarmBook.restore`).
        """
        return AlarmList(node=self.node, active=self.in_force(), recent=self.recent(), rules=self.rule_names,
                         control=control)

    # --- conditions ----------------------------------------------------------------------

    def _observe(self, rule: Rule, matches: list[Match], now: float, quiet: bool = False) -> Iterable[Observation | None]:
        """The rule's observations of ``matches``; with ``quiet``, ``None`` for each clear one
        (the rule has no alarm, so the book has no use for them: nothing is rendered)."""
        state = self._state[rule.name]
        if isinstance(rule, ThresholdRule):
            yield from threshold(rule, state, matches, now, quiet, self._obs, self._unknown(rule, quiet))
        elif isinstance(rule, StateRule):
            yield from state_condition(rule, state, matches, quiet, self._obs)
        elif isinstance(rule, CounterRule):
            yield from counter(rule, state, matches, now, quiet, self._obs)
        elif isinstance(rule, StalenessRule):
            yield from self._staleness(rule, state, matches, now, quiet)
        elif isinstance(rule, TrendRule):
            yield from trend(rule, state, matches, now, quiet, self._obs)

    def _unknown(self, rule: ThresholdRule, quiet: bool) -> dict[str, Match] | None:
        """The records whose readings ``rule``'s ``unknown_select`` says are not known now, by subject;
        ``None`` without one, or when ``quiet`` (the rule has no alarm to hold, and none starts on them)."""
        selector = self._unknown_selectors.get(rule.name)
        if selector is None or quiet or self._reads is None:
            return None
        return {m.subject: m for m in self._reads.matches(selector)
                if any(same_value(m.value, u) for u in rule.unknown_values)}

    def _obs(self, rule: Rule, match: Match | None, subject: str, labels: Mapping[str, str], active: bool,
             value: EventValue, details: Mapping[str, Any] | None = None, known: bool = True,
             quiet: bool = False) -> Observation | None:
        if quiet and not active:
            return None
        subj = self._subjects[rule.name].render(labels, subject)
        identity = self._identities.get(rule.name)
        key = identity.render(labels, "") if identity is not None else ""
        if not active:
            # The book reads the message of active observations only; formatting one for every
            # healthy subject of every rule on every frame was the engine's largest cost.
            return Observation(subject=subj, active=False, value=value, labels=dict(labels), known=known,
                               worse=worse(rule), key=key)
        order = worse(rule)
        # A state without an order says what it is now while it fires (an md array degraded, then
        # recovering onto a new member: one alarm, whose text follows); its value stays the first.
        return Observation(subject=subj, active=active, value=value, labels=dict(labels),
                           message=self._message(rule, match, subj, labels, value, details, key), worse=order,
                           key=key, restate=order is None and isinstance(rule, StateRule))

    def _message(self, rule: Rule, match: Match | None, subject: str, labels: Mapping[str, str], value: EventValue,
                 details: Mapping[str, Any] | None, key: str) -> str:
        """The message of an active observation.

        Rendered when it can change the alarm: none yet, or a reading or subject other than the
        alarm's latest (the book takes a message only with a new alarm, a worse reading, another
        subject, or a state's new text); otherwise the alarm's own, so the figures a message takes
        from the record (``{rx_gbps}``) are those of when it was raised or last changed, and a
        firing alarm costs no rendering per frame.
        """
        alarm = self.book.current(rule.name, key or subject)
        if alarm is not None and alarm.subject == subject and same_reading(alarm.value_now, value):
            return alarm.message
        template = self._messages[rule.name]
        fields: dict[str, Any] = {**labels, **(details or {}), "value": value, "subject": subject,
                                  "node": self.node, "rule": rule.name}
        selector = self._selectors[rule.name]
        if match is not None and selector is not None and self._reads is not None and template.lacks(fields):
            # The record the reading belongs to, and those around it (``{expected_gbps}``, ``{raid.name}``);
            # identity labels, the kind's figures and the value go before its fields of the same name.
            chain = self._reads.records(selector).get(match.subject)
            if chain:
                fields = {**message_fields(chain), **fields}
        return template.render({**self._params[rule.name], **fields}, f"{rule.name}: {subject} = {value}")

    def _identity(self, rule_name: str, labels: Mapping[str, str]) -> str:
        """The rule's ``identity`` rendered from a subject's labels; ``""`` (its subject) without one, or
        when the labels lack what it names (an md array's ``uuid`` on a kernel without md/uuid)."""
        template = self._identities.get(rule_name)
        return "" if template is None else template.render(labels, "")

    def _staleness(self, rule: StalenessRule, state: RuleState, matches: list[Match],
                   now: float, quiet: bool) -> Iterable[Observation | None]:
        for m in matches:
            at = number(m.value)
            if at is None:
                continue
            frames = stood_still(state, m.subject, at)
            yield self._stale_obs(rule, m, at, frames, now, quiet)

    def _stale_obs(self, rule: StalenessRule, m: Match, at: float, frames: int, now: float,
                   quiet: bool) -> Observation | None:
        age_s = max(0.0, now - at)
        limit_s = rule.max_age_s
        if rule.max_intervals > 0:
            interval_s = self.intervals.get(m.labels.get("key", ""))
            if interval_s is not None:
                # A collector that runs every 300 s is not silent after 120 s.
                limit_s = max(limit_s, rule.max_intervals * interval_s)
        silent = age_s > limit_s and frames >= rule.min_frames
        if quiet and not silent:
            return None
        # Old but not yet stood still for min_frames evaluations (the first frames after an
        # agent restart): no verdict, so an alarm carried over the restart is not resolved
        # on it and fired again (a new id, notified again) min_frames later.
        known = silent or age_s <= limit_s
        return self._obs(rule, m, m.subject, m.labels, silent, round(age_s, 3),
                         {"age_s": age_s, "limit_s": limit_s}, known=known, quiet=quiet)

    def _events(self, rule: EventRule, events: Sequence[Event]) -> Iterable[Observation]:
        for ev in events:
            if ev.kind != rule.event:
                continue
            if not all(any(same_value(ev.data.get(k), x) for x in allowed) for k, allowed in rule.data.items()):
                continue
            if not self._xid_reports[rule.name].is_new(ev):
                continue  # NVML and the kernel log both reported this Xid: the alarm counts it once
            labels = {"event_subject": ev.subject, **{k: str(v) for k, v in ev.data.items() if v is not None}}
            first_key = next(iter(rule.data), None)
            value = ev.data.get(first_key) if first_key else ev.kind
            details = {"event_message": ev.message, "event_id": ev.id, **ev.data}
            subj = self._subjects[rule.name].render(labels, ev.subject)
            fields: dict[str, Any] = {**self._params[rule.name], **labels, **details, "value": value,
                                      "subject": subj, "node": self.node, "rule": rule.name}
            yield Observation(subject=subj, active=True, value=value, labels=labels, latch=True,
                              message=self._messages[rule.name].render(fields, f"{rule.name}: {ev.message}"),
                              key=self._identity(rule.name, labels))


_EVENT = "event"
_COLLECTOR_STATE = "collector-state"
_STALENESS = "staleness"
_COUNTER = "counter"
_FIRST_SEEN = "first-seen"
_OTHER = "other"


def _kind(rule: Rule) -> str:
    """How `AlarmEngine.evaluate_data` goes about a rule (one of the constants above)."""
    if isinstance(rule, EventRule):
        return _EVENT
    if isinstance(rule, StateRule) and rule.collector:
        return _COLLECTOR_STATE
    if isinstance(rule, StalenessRule):
        return _STALENESS
    if isinstance(rule, StateRule) and rule.below_first_seen and rule.equals is None and not rule.one_of \
            and not rule.not_one_of and not rule.vanished:
        return _FIRST_SEEN
    if isinstance(rule, CounterRule):
        return _COUNTER
    return _OTHER
