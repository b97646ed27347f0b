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


def _lagging(hold_s: float = 5.0) -> tuple[Rule, ...]:
    """``md_array_lagging`` held ``hold_s`` before it fires (30 s in the defaults; the recording is 50 s)."""
    return tuple(replace(r, hold_s=hold_s) for r in default("md_array_lagging"))


def _unread_for(frames: list[Frame], start: int, seconds: int) -> list[Frame]:
    """``frames`` up to ``start``, then md unreadable: the rest of them, and ``seconds`` more frames a second apart."""
    last = frames[start - 1]
    gone = [_unread(f, last) for f in frames[start:]]
    tail = gone[-1]
    more = [replace(tail, seq=tail.seq + i, taken_at=tail.taken_at + i) for i in range(1, seconds + 1)]
    return frames[:start] + gone + more


def test_the_lagging_alarm_holds_while_mdstat_cannot_be_read() -> None:
    """The array's share of the fastest is null while md cannot be read: the alarm resolved by its absence
    after ``absent_resolve_s`` (60 s) although nothing said the array caught up."""
    frames = load_frames("enclosure-link-10g-array-lagging")
    lagging = _lagging()
    seen = _transitions(lagging, frames)
    fired_at = next(i for i, _, change, _ in seen if change == "firing")
    unread = _unread_for(frames, fired_at + 2, 120)
    assert [(rule, change) for _, rule, change, _ in _transitions(lagging, unread)] == \
        [("md_array_lagging", "pending"), ("md_array_lagging", "firing")]
    # Read again and still lagging: the same alarm, nothing new; caught up: it resolves.
    back = unread + [replace(f, seq=unread[-1].seq + 1 + i, taken_at=unread[-1].taken_at + 1 + i)
                     for i, f in enumerate(frames[fired_at:fired_at + 5])]
    assert [change for _, _, change, _ in _transitions(lagging, back)] == ["pending", "firing"]
    level = [replace(f, readings=replace(f.readings, raid=tuple(replace(a, vs_fastest_array_pct=100.0)
                                                                for a in f.readings.raid)))
             for f in back[-3:]]
    caught_up = back + [replace(f, seq=back[-1].seq + 1 + i, taken_at=back[-1].taken_at + 1 + i)
                        for i, f in enumerate(level)]
    assert [change for _, _, change, _ in _transitions(lagging, caught_up)][-1] == "resolved"


def test_the_lagging_alarm_does_not_start_nor_drop_while_mdstat_cannot_be_read() -> None:
    frames = load_frames("enclosure-link-10g-array-lagging")
    lagging = _lagging(hold_s=10.0)
    pending_at = next(i for i, _, change, _ in _transitions(lagging, frames) if change == "pending")
    # Unreadable a frame after the lag began: it neither fires on no news nor is dropped.
    unread = _unread_for(frames, pending_at + 1, 30)
    assert [change for _, _, change, _ in _transitions(lagging, unread)] == ["pending"]
    # Read again, still lagging, past its hold: it fires then.
    back = unread + [replace(f, seq=unread[-1].seq + 1 + i, taken_at=unread[-1].taken_at + 1 + i)
                     for i, f in enumerate(frames[pending_at:pending_at + 12])]
    assert [change for _, _, change, _ in _transitions(lagging, back)] == ["pending", "firing"]
