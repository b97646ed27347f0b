"""md_array_degraded over the simulator's md-degraded scenario: one alarm from the member's failure
until the rebuild onto its replacement finishes, saying what the array is doing now."""

from __future__ import annotations

from pathlib import Path

from rigmon.alarms.engine import AlarmEngine
from rigmon.schema import Alarm
from tests.alarms.helpers import T0, FakeClock, Step, default, run, sim_frames
from tests.alarms.test_engine import md


#: What the message says to check (before, it named the array and its state alone).
CHECK = "mdadm --detail /dev/md127 names the member to replace or re-add"


def _degraded(engine: AlarmEngine) -> list[Alarm]:
    return [a for a in (*engine.active(), *engine.recent()) if a.rule == "md_array_degraded"]


def test_the_alarm_holds_through_the_rebuild_and_says_it_is_recovering(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    engine = AlarmEngine(default("md_array_degraded"), "n1", clock)
    seen = []  # (health, sync_action, sync %, [(state, message, value, value_now)]) when any changes
    for frame in sim_frames("md-degraded", 1, tmp_path, clock, 100, 1.0):
        engine.evaluate(frame)
        array = frame.readings.raid[0]
        now = (array.health, array.sync_action, [(a.state, a.message, a.value, a.value_now) for a in _degraded(engine)])
        if not seen or now != seen[-1][1:]:
            seen.append((array.sync_progress_pct, *now))
    steps = [(health, action, alarms) for _, health, action, alarms in seen]
    assert steps == [
        ("ok", "idle", []),
        ("degraded", "idle", [("firing", f"array md127 is degraded, 1 of 2 members working (raid1): {CHECK}",
                               "degraded", "degraded")]),
        # Rebuilding onto the new member: still degraded (mdstat [U_], sysfs degraded 1), one alarm.
        ("recovering", "recover", [("firing", f"array md127 is recovering, 1 of 2 members working (raid1): {CHECK}",
                                    "degraded", "recovering")]),
        # Clean only when the rebuild has finished.
        ("ok", "idle", [("resolved", f"array md127 is recovering, 1 of 2 members working (raid1): {CHECK}",
                         "degraded", "ok")]),
    ]
    rebuilding = seen[2][0]
    assert rebuilding is not None and rebuilding < 50.0  # it held from the rebuild's start
    assert len(_degraded(engine)) == 1


def test_degraded_recovering_and_clean_is_one_alarm() -> None:
    _, seen = run(default("md_array_degraded"), [Step(0, md("clean", 0)), Step(1, md("degraded", 1)),
                                                 Step(2, md("recovering", 0)), Step(3, md("recovering", 0)),
                                                 Step(4, md("clean", 0))])
    assert seen == [(1, "firing", "md:md0"), (4, "resolved", "md:md0")]
