"""A simulated healthy day through the real collectors and the default rules fires nothing."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rigmon.agent.check import readings_from
from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.rules import default_rules, parse_rules
from rigmon.collectors import REGISTRY
from rigmon.collectors.base import CollectorContext, NoData
from rigmon.config import AgentConfig, AgentSection
from rigmon.hw.root import HostRoot
from rigmon.schema import SCHEMA_VERSION, CollectorStatus, Frame
from rigmon.sim.rig import SimRig, get_scenario
from tests.alarms.helpers import T0, FakeClock

DAY_S = 86400.0
# One frame per 90 simulated seconds: 960 frames per node keep the test to seconds. Rules
# see the same physics as at 1 Hz, only sparser (hold times are counted in seconds, not frames).
STEP_S = 90.0

# A rule the healthy day must trip, to prove readings reach the engine at all.
CANARY = parse_rules('[[rule]]\nname = "canary"\nkind = "threshold"\nselect = "net[name=eth0].rx_bytes_per_s"\n'
                     'above = 1.0\n', "canary")


@pytest.fixture
def fast_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory in memory when the machine has one: the simulator rewrites its tree every step."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="rigmon-day-") as d:
            yield Path(d)
    else:
        yield tmp_path


def test_healthy_day_fires_nothing(fast_dir: Path) -> None:
    rig = SimRig(get_scenario("healthy"), 2, fast_dir)
    clock = FakeClock(T0)
    engines = []
    for node in rig.nodes:
        config = AgentConfig(agent=AgentSection(node=node.name, root=str(node.tree.root)))
        ctx = CollectorContext(root=HostRoot(node.tree.root), clock=clock, config=config)
        collectors = {name: factory(ctx) for name, factory in REGISTRY.items()}
        engines.append((node, collectors, AlarmEngine(default_rules(), node.name, clock),
                        AlarmEngine(CANARY, node.name, clock)))
    transitions = []
    canary = []
    for seq in range(1, int(DAY_S / STEP_S) + 1):
        t_s = seq * STEP_S
        clock.t = T0 + t_s
        rig.step(t_s)
        for node, collectors, engine, canary_engine in engines:
            records: list[object] = []
            statuses = {}
            for name, collector in collectors.items():
                try:
                    records.extend(collector.collect())
                except NoData:
                    statuses[name] = CollectorStatus(state="absent", ok=True, duration_s=0.001, sampled_at=clock.t)
                    continue
                statuses[name] = CollectorStatus(state="ok", ok=True, duration_s=0.001, sampled_at=clock.t)
            frame = Frame(schema=SCHEMA_VERSION, node=node.name, run_id="day", seq=seq, taken_at=clock.t,
                          agent_start=T0, collectors=statuses, readings=readings_from(records))
            transitions += engine.evaluate(frame)
            canary += canary_engine.evaluate(frame)
    rig.close()
    for _, collectors, _, _ in engines:
        for collector in collectors.values():
            collector.close()
    assert [(t.change, t.alarm.rule, t.alarm.subject, t.alarm.message) for t in transitions] == []
    assert {t.alarm.node for t in canary if t.change == "firing"} == {"node01", "node02"}
