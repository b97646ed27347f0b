"""Test helpers for the rule engine: a settable clock and a table runner."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.rules import Rule, default_rules, parse_rules
from rigmon.schema import Event


class FakeClock:
    """Time that moves only when told."""

    def __init__(self, t: float = 1_700_000_000.0) -> None:
        self.t = t

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t


@dataclass
class Step:
    """Frame data at time ``t`` (seconds after the start), plus events since the last step."""

    t: float
    data: dict[str, Any]
    events: list[Event] = field(default_factory=list)


T0 = 1_700_000_000.0


def rules(text: str) -> tuple[Rule, ...]:
    return parse_rules(text, "test")


def default(*names: str) -> tuple[Rule, ...]:
    by_name = {r.name: r for r in default_rules()}
    return tuple(by_name[n] for n in names)


def run(rule_set: Sequence[Rule], steps: Sequence[Step]) -> tuple[AlarmEngine, list[tuple[float, str, str]]]:
    """Feed the steps to a new engine; return it and the transitions as (t, change, subject)."""
    clock = FakeClock(T0)
    engine = AlarmEngine(rule_set, "n1", clock, id_prefix="run")
    seen: list[tuple[float, str, str]] = []
    for step in steps:
        clock.t = T0 + step.t
        for tr in engine.evaluate_data(step.data, step.events, clock.t):
            seen.append((step.t, tr.change, tr.alarm.subject))
    return engine, seen


def event(kind: str, subject: str, message: str = "", **data: str | int | float | bool | None) -> Event:
    return Event(id=f"e-{kind}-{subject}", at=T0, kind=kind, severity="warning", subject=subject,
                 message=message or kind, data=dict(data))
