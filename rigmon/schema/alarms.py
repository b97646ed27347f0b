"""Alarms (rigmon/alarms): the alarm records served on /v1/alarms and kept by the journal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, get_args

import msgspec

from rigmon.schema.frame import EventValue, Severity
from rigmon.schema.record import Record

AlarmState = Literal["pending", "firing", "resolved"]

#: Why an alarm resolved (`Alarm.resolve_reason`), one value for each way an episode ends:
#:
#: * ``cleared``: its condition was clear (for the rule's ``clear_hold_s``; a pending alarm at once);
#: * ``unreported``: its subject was no longer reported (for the rule's ``absent_resolve_s``): a
#:   collector that lost it, a node the dashboard no longer follows;
#: * ``quiet``: an event alarm saw no new event for the rule's ``resolve_after_s`` (also when that
#:   ran out while the agent was down);
#: * ``acknowledged``: an event alarm ended by its acknowledgement;
#: * ``cleared_after_restart``: carried over an agent restart, the first fresh readings were clear;
#: * ``unreported_after_restart``: carried over an agent restart, its subject was not reported since;
#: * ``rule_removed``: carried over an agent restart, its rule was no longer in force;
#: * ``superseded``: carried over an agent restart, another alarm of its rule and subject was taken over;
#: * ``restarted_without``: the dashboard ended it because its agent restarted without it (the new
#:   run did not take it over).
ResolveReason = Literal["cleared", "unreported", "quiet", "acknowledged", "cleared_after_restart",
                        "unreported_after_restart", "rule_removed", "superseded", "restarted_without"]
RESOLVE_REASONS: frozenset[str] = frozenset(get_args(ResolveReason))

#: What the alarm lifecycle puts at the end of the message of an alarm resolved for a reason without a
#: fresh clear reading (its message is otherwise the worst it was). Readers that need to know how an alarm
#: ended go by `Alarm.resolve_reason`; these endings are for the text.
RESOLVE_ENDINGS: Mapping[str, str] = {
    "unreported": " (no longer reported)",
    "unreported_after_restart": " (not reported since the agent restarted)",
    "cleared_after_restart": " (clear after the agent restarted)",
    "rule_removed": " (rule no longer in force after the agent restarted)",
    "superseded": " (superseded after the agent restarted)",
    "restarted_without": " (agent restarted without it)",
}


class Alarm(Record, frozen=True):
    """One alarm episode of a rule on one subject, from pending to resolved.

    ``id`` is unique per agent run and stays the same through the episode's transitions;
    a new episode of the same rule and subject gets a new id. ``started_at`` is when the
    condition was first seen, ``fired_at`` when the alarm fired (``None`` if it never did:
    a pending alarm whose condition cleared within its hold time), ``updated_at`` the last
    change of any field. Times are Unix seconds. ``value`` is the reading that decided
    (volts, a state, an increase, an age in seconds, a slope per day); ``count`` is how
    many matching events an event alarm has seen.

    While an alarm is pending, firing or held (its condition clear but not yet for the
    rule's ``clear_hold_s``), ``value`` and ``message`` keep its *worst* observation (the
    lowest rail minimum, the largest increase), never a better one, and ``worst_at`` says
    when that was; ``value_now`` is the latest reading (``None`` for an event alarm, whose
    value and message are its latest event's).

    ``identity`` is what the alarm is kept by besides its rule when that is not its subject
    (the rule's ``identity`` rendered, ``md:<array uuid>``: the subject ``md:md127`` may become
    ``md:md126`` within one episode); ``""``: its subject. Notifiers keep one identity's
    notifications in order by it.
    """

    id: str
    rule: str
    rule_kind: str
    severity: Severity
    node: str
    subject: str
    state: AlarmState
    message: str
    started_at: float
    updated_at: float
    value: EventValue = None
    fired_at: float | None = None
    resolved_at: float | None = None
    acknowledged_at: float | None = None
    acknowledged_by: str | None = None
    count: int = 1
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    value_now: EventValue = None
    worst_at: float | None = None
    # Added for alarms kept by an identity other than their subject (additive).
    identity: str = ""
    # Added for notifiers and dashboards to tell how an alarm ended (additive).
    resolve_reason: str | None = None


class AlarmList(Record, frozen=True):
    """``/v1/alarms``: active alarms (pending or firing) and recently resolved ones, newest first."""

    node: str
    active: tuple[Alarm, ...]
    recent: tuple[Alarm, ...]
    rules: tuple[str, ...] = ()
    control: bool = False
    """Whether this agent accepts acknowledgements (a control token is configured)."""
