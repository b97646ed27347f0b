"""The conditions of the rule kinds over one frame's matches: threshold, state, counter and trend.

Each yields the rule's observations of its matches (``None`` for a clear one when ``quiet``:
the rule has no alarm, so nothing needs rendering) and keeps the rule's memory between frames
in its `RuleState`. The observations themselves are built by the engine (`Observe`), which
holds the rules' templates. Staleness and event rules are the engine's own.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from rigmon.alarms.observations import Observation, Worse
from rigmon.alarms.rule_state import RuleState, counter_history
from rigmon.alarms.rules import (
    SECONDS_PER_DAY,
    CounterRule,
    Rule,
    StalenessRule,
    StateRule,
    ThresholdRule,
    TrendRule,
)
from rigmon.alarms.selector import Match
from rigmon.alarms.values import identity, number, same_value, slope, tidy
from rigmon.schema import EventValue


class Observe(Protocol):
    """`AlarmEngine`'s observation of one subject (``None`` for a clear one when ``quiet``)."""

    def __call__(self, rule: Rule, match: Match | None, subject: str, labels: Mapping[str, str], active: bool,
                 value: EventValue, details: Mapping[str, Any] | None = None, known: bool = True,
                 quiet: bool = False) -> Observation | None: ...


def threshold(rule: ThresholdRule, state: RuleState, matches: list[Match], now: float, quiet: bool,
              obs: Observe, unknown: Mapping[str, Match] | None = None) -> Iterable[Observation | None]:
    """A reading below or above a limit (or its min, max or mean over ``window_s``), with hysteresis.

    ``unknown``: the records (by subject, with their ``unknown_select`` match) whose readings are not
    known now: no verdict on them, whether their number is there or not (it is null then, and a
    subject without an observation would resolve by its absence).
    """
    for m in matches:
        v = number(m.value)
        if v is None:
            continue
        if unknown and m.subject in unknown:
            continue
        if rule.aggregate != "last":
            win = state.window.setdefault(m.subject, deque())
            win.append((now, v))
            while win and win[0][0] < now - rule.window_s:
                win.popleft()
            if now - state.first_seen.setdefault(m.subject, now) < rule.window_s:
                # Less than one window of history: no verdict yet, but the subject is there
                # (an alarm carried over a restart must not count it absent).
                if not quiet:
                    yield obs(rule, m, m.subject, m.labels, False, tidy(v), known=False)
                continue
            values = [x for _, x in win]
            v = min(values) if rule.aggregate == "min" else max(values) if rule.aggregate == "max" \
                else sum(values) / len(values)
        was = state.latched.get(m.subject, False)
        if rule.below is not None:
            trip, clear = v < rule.below, v >= rule.below + rule.hysteresis
        else:
            assert rule.above is not None
            trip, clear = v > rule.above, v <= rule.above - rule.hysteresis
        active = trip or (was and not clear)
        state.latched[m.subject] = active
        if quiet and not active:
            continue
        yield obs(rule, m, m.subject, m.labels, active, tidy(v), quiet=quiet)
    if unknown and not quiet:
        for subject, u in unknown.items():
            yield obs(rule, u, subject, u.labels, False, u.value, known=False)


def state_condition(rule: StateRule, state: RuleState, matches: list[Match], quiet: bool,
                    obs: Observe) -> Iterable[Observation | None]:
    """A reading equal to, among or not among given values; below the first seen or the expected; or vanished."""
    present: set[str] = set()
    for m in matches:
        present.add(m.subject)
        if rule.unknown_values and any(same_value(m.value, u) for u in rule.unknown_values):
            # Not known now: neither a clear (its alarm would resolve) nor a reason to fire.
            if not quiet:
                yield obs(rule, m, m.subject, m.labels, False, m.value, known=False)
            continue
        details: dict[str, Any] = {}
        if rule.equals is not None:
            active = same_value(m.value, rule.equals)
        elif rule.one_of:
            active = any(same_value(m.value, x) for x in rule.one_of)
        elif rule.not_one_of:
            active = not any(same_value(m.value, x) for x in rule.not_one_of)
        elif rule.vanished:
            state.seen[m.subject] = dict(m.labels)
            active = False
        else:
            v = number(m.value)
            if v is None:
                continue
            if rule.below_first_seen:
                first = state.first_seen.setdefault(m.subject, v)
                details["first_seen"] = tidy(first)
                active = v < first
            else:
                ident = identity(m.labels)
                if ident is None or ident not in rule.expected:
                    continue
                details["expected"] = tidy(rule.expected[ident])
                active = v < rule.expected[ident]
        yield obs(rule, m, m.subject, m.labels, active, m.value, details, quiet=quiet)
    if rule.vanished:
        for subject, labels in state.seen.items():
            if subject not in present:
                yield obs(rule, None, subject, labels, True, None)


def counter(rule: CounterRule, state: RuleState, matches: list[Match], now: float, quiet: bool,
            obs: Observe) -> Iterable[Observation | None]:
    """A counter rising by more than ``max_increase`` within ``window_s``."""
    # The histories are updated here, not by `rigmon.alarms.quiet.counter_update`: what it
    # remembered of its last update no longer holds.
    state.quiet_pairs = None
    start = now - rule.window_s
    for m in matches:
        v = number(m.value)
        if v is None:
            continue
        hist = counter_history(state.window, m.subject, v, now, start)
        increase = v - hist[0][1]
        active = increase > rule.max_increase
        if quiet and not active:
            continue
        # Less than a window of history (since the agent started or the counter was reset)
        # cannot say the counter is quiet: an alarm carried over a restart, or firing across
        # a driver reload, must not resolve on it and fire again moments later.
        known = active or hist[0][0] <= start
        # The time the increase was counted over: the whole window once the history reaches
        # back to its start, less since the agent started or the counter was reset.
        span_s = min(rule.window_s, now - hist[0][0])
        yield obs(rule, m, m.subject, m.labels, active, tidy(increase),
                  {"increase": increase, "total": tidy(v), "span_s": span_s}, known=known, quiet=quiet)


def trend(rule: TrendRule, state: RuleState, matches: list[Match], now: float, quiet: bool,
          obs: Observe) -> Iterable[Observation | None]:
    """A reading whose daily slope over ``window_s`` (of ``bucket_s`` means) rises above ``max_rise_per_day``."""
    for m in matches:
        v = number(m.value)
        if v is None:
            continue
        buckets = state.buckets.setdefault(m.subject, deque())
        index = math.floor(now / rule.bucket_s)
        if buckets and buckets[-1][0] == index:
            buckets[-1][1] += v
            buckets[-1][2] += 1
        else:
            buckets.append([float(index), v, 1.0])
        while buckets and (buckets[0][0] + 1) * rule.bucket_s <= now - rule.window_s:
            buckets.popleft()
        if (buckets[-1][0] - buckets[0][0]) * rule.bucket_s < rule.min_span_s:
            # Not enough history for a trend: no verdict, not a clear, and not absent either.
            if not quiet:
                yield obs(rule, m, m.subject, m.labels, False, None, known=False)
            continue
        slope_per_day = slope([((b[0] + 0.5) * rule.bucket_s, b[1] / b[2]) for b in buckets]) * SECONDS_PER_DAY
        yield obs(rule, m, m.subject, m.labels, slope_per_day > rule.max_rise_per_day,
                        round(slope_per_day, 6), quiet=quiet)


def worse(rule: Rule) -> Worse | None:
    """Which way a rule's readings get worse: a value below a limit (or below the speed
    first seen or expected) is worse the lower it is; an increase, an age or a slope the
    higher; a state has no order."""
    if isinstance(rule, ThresholdRule):
        return "lower" if rule.below is not None else "higher"
    if isinstance(rule, StateRule):
        return "lower" if rule.below_first_seen or rule.expected else None
    if isinstance(rule, (CounterRule, StalenessRule, TrendRule)):
        return "higher"
    return None
