"""Alarms (rigmon/alarms): the alarm records served on /v1/alarms and kept by the journal."""

from __future__ import annotations

from typing import Literal

import msgspec

from rigmon.schema.frame import EventValue, Severity
from rigmon.schema.record import Record

AlarmState = Literal["pending", "firing", "resolved"]


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


class AlarmList(Record, frozen=True):
    """``/v1/alarms``: active alarms (pending or firing) and recently resolved ones, newest first."""

    node: str
    active: tuple[Alarm, ...]
    recent: tuple[Alarm, ...]
    rules: tuple[str, ...] = ()
    control: bool = False
    """Whether this agent accepts acknowledgements (a control token is configured)."""
