"""Observations: what a rule's condition says of one subject in one evaluation, and how
several of one subject become one (`merge_by_subject`); the input of `rigmon.alarms.lifecycle.AlarmBook`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import msgspec

from rigmon.schema import EventValue

#: Which way a rule's readings get worse.
Worse = Literal["lower", "higher"]


class Observation(msgspec.Struct, frozen=True, gc=False):
    """A rule's condition for one subject in one evaluation.

    This module's records are `msgspec.Struct`s, not dataclasses (cheaper to define at import
    and to build). The frozen ones are not tracked by the cycle collector (``gc=False``): they
    hold strings, numbers, dicts of strings and `Alarm` records, and cannot be in a cycle.

    Attributes:
        subject: what the alarm is about (``gpu:0``, ``collector:host``).
        active: whether the condition holds.
        value: the deciding reading.
        message: the alarm's text if it fires (or stays firing).
        labels: the subject's identity (``index``, ``name``, ``key``).
        latch: an event: fires at once and stays firing until acknowledged or expired.
        node: the node the alarm is about, when not the book's own (cluster rules).
        known: False when the rule has data for the subject but no verdict yet (a counter
            whose window is not filled since the agent started or the counter was reset):
            nothing changes, a clear hold neither starts nor ends, and the subject is not
            absent. Only meaningful with ``active`` False.
        worse: which way ``value`` gets worse (``lower`` for a rail minimum, ``higher`` for
            an increase or an age); ``None`` when values have no order (a state): the
            alarm then keeps the first observation that fired it.
        key: what makes the subject one, when its text does not (``""``: the subject). The
            cluster rules' subject ``node:gpu01`` is shown, but two agents may both call
            themselves gpu01: their alarms are kept apart by the dashboard's key of each.
        restate: the message says the condition as it is now, not as it fired (a node
            unreachable first because its agent stopped the connection, now because the
            connection is refused); the value still keeps the first observation.
    """

    subject: str
    active: bool
    value: EventValue = None
    message: str = ""
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    latch: bool = False
    node: str = ""
    known: bool = True
    worse: Worse | None = None
    key: str = ""
    restate: bool = False

    @property
    def identity(self) -> str:
        """What the book keeps one alarm per (with the rule): ``key``, else the subject."""
        return self.key or self.subject


def is_worse(new: EventValue, old: EventValue, worse: Worse | None) -> bool:
    """Whether reading ``new`` is strictly worse than ``old`` for a rule whose values get
    worse ``worse`` (a number against a missing or non-numeric one is worse; without an
    order, nothing is)."""
    if worse is None:
        return False
    a, b = _as_number(new), _as_number(old)
    if a is None:
        return False
    if b is None:
        return True
    return a < b if worse == "lower" else a > b


def _as_number(value: EventValue) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def merge_by_subject(observations: Iterable[Observation]) -> list[Observation]:
    """One observation per subject (`Observation.identity`), in order of first appearance (events are left as they are).

    Several matches of a rule can share a subject: the NVLinks of one GPU under the
    subject ``gpu:{index}``. Applied one after the other, a clear link would resolve what a
    rising link had just fired, on every frame. The subject is active when any of its
    observations is (the one with the largest numeric value decides, else the first
    active one); otherwise it has no verdict when any has none; otherwise it is clear.
    Latched (event) observations each count as one more event, so they are not merged.
    """
    out: list[Observation] = []
    where: dict[str, int] = {}
    for obs in observations:
        if obs.latch:
            out.append(obs)
            continue
        i = where.get(obs.identity)
        if i is None:
            where[obs.identity] = len(out)
            out.append(obs)
        elif _rank(obs) > _rank(out[i]):
            out[i] = obs
    return out


def _rank(obs: Observation) -> tuple[int, float]:
    """How strongly an observation speaks for its subject: active beats unknown beats clear;
    among active ones, the larger number."""
    if not obs.active:
        return (1 if not obs.known else 0, 0.0)
    value = obs.value
    number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("-inf")
    return (2, number)
