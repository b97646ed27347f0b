"""Test helpers for the rule engine: a settable clock, a table runner, a rail rule, GPU states, and frames
of a simulated rig read by the real collectors."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rigmon.agent.check import readings_from
from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.memory import EngineMemory
from rigmon.alarms.rules import Rule, default_rules, parse_rules
from rigmon.collectors import REGISTRY
from rigmon.collectors.base import CollectorContext, EventDraft, NoData
from rigmon.config import AgentConfig, AgentSection
from rigmon.hw.root import HostRoot
from rigmon.schema import SCHEMA_VERSION, CollectorStatus, Event, Frame
from rigmon.sim.rig import SimRig, get_scenario
from rigmon.typed import from_data, to_data


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


def sim_frames(scenario: str, nodes: int, workdir: Path, clock: FakeClock, steps: int,
               step_s: float, drafts: list[EventDraft] | None = None) -> Iterator[Frame]:
    """Frames of a simulated rig, one per node every ``step_s`` simulated seconds.

    The real collectors read each node's tree on ``clock`` (set to the frame's time), as the
    agent's sampler would, without threads: pushed sources (the ADC on its pty) do not
    report, so rail readings are absent. The collectors' events go to ``drafts`` when given.
    """
    rig = SimRig(get_scenario(scenario), nodes, workdir)
    per_node = []
    for node in rig.nodes:
        config = AgentConfig(agent=AgentSection(node=node.name, root=str(node.tree.root)))
        ctx = CollectorContext(root=HostRoot(node.tree.root), clock=clock, config=config)
        per_node.append((node, {name: factory(ctx) for name, factory in REGISTRY.items()}))
    try:
        for seq in range(1, steps + 1):
            t_s = seq * step_s
            clock.t = T0 + t_s
            rig.step(t_s)
            for node, collectors in per_node:
                records: list[object] = []
                statuses = {}
                for name, collector in collectors.items():
                    try:
                        got = collector.collect()
                        records.extend(got)
                        if drafts is not None:
                            drafts.extend(r for r in got if isinstance(r, EventDraft))
                    except NoData:
                        statuses[name] = CollectorStatus(state="absent", ok=True, duration_s=0.001,
                                                         sampled_at=clock.t)
                        continue
                    statuses[name] = CollectorStatus(state="ok", ok=True, duration_s=0.001, sampled_at=clock.t)
                yield Frame(schema=SCHEMA_VERSION, node=node.name, run_id=scenario, seq=seq, taken_at=clock.t,
                            agent_start=T0, collectors=statuses, readings=readings_from(records))
    finally:
        rig.close()
        for _, collectors in per_node:
            for collector in collectors.values():
                collector.close()


RAIL = """
[[rule]]
name = "rail"
kind = "threshold"
select = "psu_rail.volts.min_volts"
below = 11.7
subject = "psu"
"""


def gpu_states(*states: str) -> dict[str, Any]:
    return {"gpus": [{"index": i, "uuid": f"GPU-{i}", "name": "V100", "state": s} for i, s in enumerate(states)]}


def restarted(old: AlarmEngine, new: AlarmEngine, now: float) -> AlarmEngine:
    """``new`` after taking over what ``old`` saved, through the state file's JSON (an agent restart)."""
    new.restore_memory(from_data(EngineMemory, json.loads(json.dumps(to_data(old.export_memory())))), now)
    return new


def changes(e: AlarmEngine, data: dict[str, Any], t: float) -> list[tuple[str, str, str, bool]]:
    """The transitions of evaluating ``data`` at ``T0 + t``: (change, alarm id, subject, restored)."""
    return [(tr.change, tr.alarm.id, tr.alarm.subject, tr.restored) for tr in e.evaluate_data(data, [], T0 + t)]
