"""Fast paths for rules without an alarm ("quiet" rules), which only need to know whether any subject is active.

Most rules, most of the time, see only healthy subjects: their subjects and messages need not
be rendered nor observations built. The paths here decide that from plain values or
``(subject, value)`` pairs, read once per frame for all rules watching the same reading.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from rigmon.alarms.rule_state import RuleState, counter_history, stood_still
from rigmon.alarms.rules import CounterRule, StalenessRule, StateRule
from rigmon.alarms.values import number, same_value
from rigmon.schema import EventValue


def counter_update(rule: CounterRule, state: RuleState, pairs: list[tuple[str, EventValue]],
                   now: float) -> list[int]:
    """Update the histories of a counter rule from ``(subject, value)`` pairs; return the
    positions of those rising by more than ``max_increase``.

    An update that changed no history (every value as the history's last, no window start past
    a history's second sample) is remembered with its pairs: called again with the very same
    list (`rigmon.alarms.walk.WalkCarry` gives it again when nothing under it changed) before
    the first window start passes a second sample, it would change nothing again and find the
    same positions, so it is not gone through.
    """
    if pairs is state.quiet_pairs and now < state.quiet_until:
        return list(state.quiet_rising)
    start = now - rule.window_s
    max_increase = rule.max_increase
    histories = state.window
    rising: list[int] = []
    still = True
    until = math.inf
    for i, (subject, value) in enumerate(pairs):
        hist = histories.get(subject)
        if hist is not None and value == hist[-1][1] and type(value) is not bool:
            if len(hist) < 2:
                # Unchanged since its one sample: no increase (``max_increase`` is never negative).
                continue
            second_at = hist[1][0]
            if second_at > start:
                # Unchanged and nothing to trim: `counter_history` would change nothing.
                if second_at < until:
                    until = second_at
                if value - hist[0][1] > max_increase:
                    rising.append(i)
                continue
        v = number(value)
        if v is None:
            continue
        still = False
        hist = counter_history(histories, subject, v, now, start)
        if v - hist[0][1] > max_increase:
            rising.append(i)
    if still:
        state.quiet_pairs, state.quiet_until, state.quiet_rising = pairs, until + rule.window_s, tuple(rising)
    else:
        state.quiet_pairs = None
    return rising


def first_seen_update(state: RuleState, pairs: list[tuple[str, EventValue]]) -> list[int]:
    """Remember the first value of every subject of a ``below_first_seen`` state rule, from
    ``(subject, value)`` pairs; return the positions of those now below it (the only ones a
    quiet rule needs matches for: `rigmon.alarms.conditions.state_condition` decides the same,
    and remembering a first value again changes nothing)."""
    first_seen = state.first_seen
    below: list[int] = []
    for i, (subject, value) in enumerate(pairs):
        v = number(value)
        if v is None:
            continue
        if v < first_seen.setdefault(subject, v):
            below.append(i)
    return below


def staleness_update(rule: StalenessRule, state: RuleState, pairs: list[tuple[str, EventValue]],
                     now: float) -> list[tuple[int, float, int]]:
    """Count how long each timestamp stood still, from ``(subject, value)`` pairs; return
    ``(position, time, frames)`` of those that may be silent (older than ``max_age_s``,
    the least limit, for ``min_frames``): only they need their labels (the collector's
    own interval may raise the limit)."""
    candidates: list[tuple[int, float, int]] = []
    for i, (subject, value) in enumerate(pairs):
        at = number(value)
        if at is None:
            continue
        frames = stood_still(state, subject, at)
        if now - at > rule.max_age_s and frames >= rule.min_frames:
            candidates.append((i, at, frames))
    return candidates


def state_test(rule: StateRule) -> Callable[[EventValue], bool]:
    """Whether a reading is in the bad state of a rule with ``equals``, ``one_of`` or ``not_one_of``,
    as `rigmon.alarms.conditions.state_condition` decides it (`same_value`)."""
    wanted = (rule.equals,) if rule.equals is not None else rule.one_of or rule.not_one_of
    negate = rule.equals is None and not rule.one_of
    if all(type(x) is str for x in wanted):
        # Text against text is equality of str (a number or a bool never equals text).
        texts = frozenset(wanted)
        if negate:
            return lambda value: not (type(value) is str and value in texts)
        return lambda value: type(value) is str and value in texts
    if negate:
        return lambda value: not any(same_value(value, x) for x in wanted)
    return lambda value: any(same_value(value, x) for x in wanted)
