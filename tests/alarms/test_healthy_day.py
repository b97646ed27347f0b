"""A simulated healthy day through the real collectors and the default rules fires nothing."""

from __future__ import annotations

from pathlib import Path

from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.rules import default_rules, parse_rules
from tests.alarms.helpers import T0, FakeClock, sim_frames

DAY_S = 86400.0
# One frame per 90 simulated seconds: 960 frames per node keep the test to seconds. Rules
# see the same physics as at 1 Hz, only sparser (hold times are counted in seconds, not frames).
STEP_S = 90.0

# A rule the healthy day must trip, to prove readings reach the engine at all.
CANARY = parse_rules('[[rule]]\nname = "canary"\nkind = "threshold"\nselect = "net[name=eth0].rx_bytes_per_s"\n'
                     'above = 1.0\n', "canary")


def test_healthy_day_fires_nothing(fast_dir: Path) -> None:
    clock = FakeClock(T0)
    engines = {name: (AlarmEngine(default_rules(), name, clock), AlarmEngine(CANARY, name, clock))
               for name in ("node01", "node02")}
    transitions = []
    canary = []
    for frame in sim_frames("healthy", 2, fast_dir, clock, int(DAY_S / STEP_S), STEP_S):
        engine, canary_engine = engines[frame.node]
        transitions += engine.evaluate(frame)
        canary += canary_engine.evaluate(frame)
    assert [(t.change, t.alarm.rule, t.alarm.subject, t.alarm.message) for t in transitions] == []
    assert {t.alarm.node for t in canary if t.change == "firing"} == {"node01", "node02"}
