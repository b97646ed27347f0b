"""The md alarms while the agent cannot read /proc/mdstat: the arrays are listed with their state unknown
(`rigmon.collectors.raid_unread`), and an alarm on them neither resolves nor starts on no news."""

from __future__ import annotations

from msgspec.structs import replace

from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.rules import Rule, StateRule
from rigmon.collectors.raid_unread import unread_array
from rigmon.schema import CollectorStatus, Frame
from tests.alarms.helpers import FakeClock, default
from tests.tui.snapshot_apps.record_frames import load_frames

MD_RULES = ("md_array_degraded", "md_array_broken", "md_member_failed")


def _unread(frame: Frame, last_read: Frame) -> Frame:
    """``frame`` as the agent sends it once /proc/mdstat is gone after ``last_read``."""
    raid = tuple(unread_array(a) for a in last_read.readings.raid)
    collectors = {**frame.collectors, "raid": CollectorStatus(state="error", ok=False, error="md status unreadable")}
    return replace(frame, readings=replace(frame.readings, raid=raid), collectors=collectors)


def _transitions(rules: tuple[Rule, ...], frames: list[Frame]) -> list[tuple[int, str, str, str]]:
    """(frame index, rule, change, subject) of every transition over ``frames``."""
    clock = FakeClock(frames[0].taken_at)
    engine = AlarmEngine(rules, "n1", clock)
    out = []
    for index, frame in enumerate(frames):
        clock.t = frame.taken_at
        out += [(index, t.alarm.rule, t.change, t.alarm.subject) for t in engine.evaluate(frame)]
    return out


def test_md_alarms_hold_while_mdstat_cannot_be_read() -> None:
    frames = load_frames("raid1-member-failed-recovering")[:40]
    # Degraded with a faulty member from frame 20; md unreadable from frame 25 to the end.
    unread = frames[:25] + [_unread(f, frames[24]) for f in frames[25:]]
    seen = _transitions(default(*MD_RULES), unread)
    fired = [(rule, change) for _, rule, change, _ in seen]
    assert ("md_array_degraded", "firing") in fired and ("md_member_failed", "firing") in fired, seen
    # Nothing resolves on no news: not the array's alarm, not its faulty member's.
    assert [s for s in seen if s[2] == "resolved"] == [], seen


def test_an_md_alarm_does_not_fire_on_the_last_health_read() -> None:
    # A degraded alarm held 5 s before it fires: md goes unreadable a frame after the array degraded.
    rule = replace(next(r for r in default("md_array_degraded") if isinstance(r, StateRule)), hold_s=5.0)
    frames = load_frames("raid1-member-failed-recovering")[:40]
    start = next(i for i, f in enumerate(frames) if f.readings.raid[0].health == "degraded")
    gone = frames[:start + 1] + [_unread(f, frames[start]) for f in frames[start + 1:start + 20]]
    assert [change for _, _, change, _ in _transitions((rule,), gone)] == ["pending"]
    # Read again, still degraded: it fires then.
    back = gone + frames[start + 20:start + 28]
    assert [change for _, _, change, _ in _transitions((rule,), back)] == ["pending", "firing"]
