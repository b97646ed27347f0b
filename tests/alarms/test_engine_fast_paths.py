"""The engine's shortcuts change no alarm: reading the frame's records (`frame_view`) instead of
plain data, leaving out clear observations of rules without alarms, checking memoryless state
rules by value, and keeping only a counter's changes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.lifecycle import Transition
from rigmon.alarms.rules import default_rules
from rigmon.alarms.selector import frame_data
from rigmon.schema import Frame, decode_data
from tests.alarms.helpers import T0, FakeClock, rules

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "frames"
NAMES = sorted(p.name.split(".")[0] for p in FIXTURES.glob("*.jsonl.gz"))


def load(name: str) -> list[Frame]:
    with gzip.open(FIXTURES / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
        return [decode_data(Frame, json.loads(line)) for line in f if line.strip()]


def summary(transitions: list[Transition]) -> list[tuple[object, ...]]:
    return [(t.change, t.previous, t.restored, t.alarm) for t in transitions]


@pytest.mark.parametrize("name", NAMES)
def test_shortcuts_give_the_same_transitions_on_recorded_frames(name: str) -> None:
    frames = load(name)
    fast = AlarmEngine(default_rules(), "n1", FakeClock(), id_prefix="x")
    full = AlarmEngine(default_rules(), "n1", FakeClock(), id_prefix="x")
    full.skip_quiet = False
    fired = 0
    for frame in frames:
        a = fast.evaluate(frame)
        b = full.evaluate_data(frame_data(frame), frame.events, frame.taken_at)
        assert summary(a) == summary(b), frame.seq
        fired += sum(1 for t in a if t.change == "firing")
    assert fast.active() == full.active() and fast.recent() == full.recent()
    if name.startswith(("v100-gpu-lost", "raid1-member")):
        assert fired  # the comparison saw alarms fire, not only quiet frames


COUNTER = """
[[rule]]
name = "replay"
kind = "counter"
select = "gpus[*].pcie_replay_total"
max_increase = 10
window_s = 600
clear_hold_s = 60
subject = "gpu:{index}"
"""


def replay_data(total: int) -> dict[str, object]:
    return {"gpus": [{"index": 0, "pcie_replay_total": total}, {"index": 1, "pcie_replay_total": 0}]}


@pytest.mark.parametrize("skip_quiet", [True, False])
def test_a_counter_keeps_its_changes_only_and_fires_and_resolves_as_before(skip_quiet: bool) -> None:
    engine = AlarmEngine(rules(COUNTER), "n1", FakeClock(), id_prefix="x")
    engine.skip_quiet = skip_quiet
    seen = []
    # Quiet for 20 minutes, 12 replays within a minute, then quiet again for 20 minutes.
    totals = [5] * 1200 + [5 + i // 5 for i in range(60)] + [17] * 1200
    for t, total in enumerate(totals):
        seen += [(t, tr.change, tr.alarm.subject, tr.alarm.value) for tr in
                 engine.evaluate_data(replay_data(total), [], T0 + t)]
    # As the engine that kept every sample found (main before round 3): 11 more than 600 s
    # before at t=1255; clear once the window has slid past the first rise (t=1810) and the
    # 60 s clear hold has run.
    assert seen == [(1255, "firing", "gpu:0", 11), (1870, "resolved", "gpu:0", 12)]
    histories = engine._state["replay"].window
    # One change each, at or before the window's start: the value the increase is counted from
    # (every sample of the last 600 s was kept before: 601 each).
    assert {subject: len(h) for subject, h in histories.items()} == {"gpus[index=0]": 1, "gpus[index=1]": 1}


SLOWER = """
[[rule]]
name = "slower"
kind = "state"
select = "net[*].speed_mbps"
below_first_seen = true
hold_s = 2
clear_hold_s = 3
subject = "link:{name}"
message = "link {name} at {value} Mb/s, first seen at {first_seen} Mb/s"
"""


@pytest.mark.parametrize("skip_quiet", [True, False])
def test_a_link_below_its_first_speed_fires_and_resolves_as_before(skip_quiet: bool) -> None:
    """A quiet ``below_first_seen`` rule reads subjects and values only; a link that drops below its
    first speed is observed from its match as before (message with the first speed)."""
    engine = AlarmEngine(rules(SLOWER), "n1", FakeClock(), id_prefix="x")
    engine.skip_quiet = skip_quiet
    seen = []
    speeds = [1000] * 5 + [100] * 6 + [1000] * 6 + [None] * 2 + [10000] * 2
    for t, speed in enumerate(speeds):
        data = {"net": [{"name": "eth0", "speed_mbps": speed}, {"name": "eth1", "speed_mbps": 1000 if t else 10}]}
        seen += [(t, tr.change, tr.alarm.subject, tr.alarm.value, tr.alarm.message) for tr in
                 engine.evaluate_data(data, [], T0 + t)]
    # As main before the shortcut: pending at the drop, firing after the 2 s hold, resolved 3 s
    # after the speed came back; a missing reading forgets nothing, a faster one raises nothing.
    message = "link eth0 at 100 Mb/s, first seen at 1000 Mb/s"
    assert seen == [(5, "pending", "link:eth0", 100, message), (7, "firing", "link:eth0", 100, message),
                    (14, "resolved", "link:eth0", 100, message)]
    assert engine._state["slower"].first_seen == {"net[name=eth0]": 1000, "net[name=eth1]": 10}
