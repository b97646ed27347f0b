"""Engine memory across a restart: a second engine restored from the first one's export
(through JSON, as the agent's state file does) keeps trends, first-seen values and
acknowledged alarms, and re-derives firing state from fresh readings."""

from __future__ import annotations

import json
from typing import Any

from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.memory import EngineMemory
from rigmon.alarms.rules import Rule
from rigmon.typed import from_data, to_data
from tests.alarms.helpers import T0, FakeClock, default, event, rules

DAY = 86400.0

SLOW_LINK = """
[[rule]]
name = "slow"
kind = "state"
select = "net[*].speed_mbps"
below_first_seen = true
subject = "link:{name}"
message = "{name} at {value} Mb/s, first {first_seen}"
"""

RAIL = """
[[rule]]
name = "rail"
kind = "threshold"
select = "psu_rail.volts.min_volts"
below = 11.7
hold_s = 5.0
subject = "psu"
message = "rail {value} V"
"""


def engine(rule_set: tuple[Rule, ...], prefix: str = "run1") -> AlarmEngine:
    return AlarmEngine(rule_set, "n1", FakeClock(T0), id_prefix=prefix)


def restart(old: AlarmEngine, rule_set: tuple[Rule, ...] | None = None, now: float = T0) -> AlarmEngine:
    """A new engine (new run id) restored from the old one's memory, through JSON."""
    memory = from_data(EngineMemory, json.loads(json.dumps(to_data(old.export_memory()))))
    new = engine(old.rules if rule_set is None else rule_set, prefix="run2")
    new.restore_memory(memory, now)
    return new


def rail(volts: float) -> dict[str, Any]:
    return {"psu_rail": {"volts": {"min_volts": volts}}}


def resistance(mohm: float) -> dict[str, Any]:
    return {"path_resistance": [{"path": "adc", "resistance_mohm": mohm}]}


def feed_trend(e: AlarmEngine, start_s: float, end_s: float, slope_per_day: float) -> list[str]:
    changes: list[str] = []
    t = start_s
    while t <= end_s:
        changes += [tr.change for tr in e.evaluate_data(resistance(1.5 + slope_per_day * t / DAY), [], T0 + t)]
        t += 300.0
    return changes


def test_a_trend_builds_on_across_a_restart() -> None:
    before = engine(default("psu_path_resistance_rising"))
    assert feed_trend(before, 0, 0.7 * DAY, 0.2) == []  # less than min_span_s (a day): no verdict yet
    after = restart(before, now=T0 + 0.7 * DAY)
    assert feed_trend(after, 0.7 * DAY + 300, 1.2 * DAY, 0.2) == ["firing"]
    # Without the saved buckets half a day is not enough history.
    fresh = engine(default("psu_path_resistance_rising"))
    assert feed_trend(fresh, 0.7 * DAY + 300, 1.2 * DAY, 0.2) == []


def test_trend_buckets_of_a_changed_width_or_too_old_are_dropped() -> None:
    before = engine(default("psu_path_resistance_rising"))
    feed_trend(before, 0, 0.5 * DAY, 0.2)
    wider = rules(SLOW_LINK)  # a rule set without the trend rule
    memory = before.export_memory()
    assert len(memory.trends) == 1 and len(memory.trends[0].buckets) == 73
    summary = engine(wider).restore_memory(memory, T0)
    assert summary.trend_series == 0 and "psu_path_resistance_rising" in summary.dropped[0]
    # Three days (the window) after the last point every bucket is out of it.
    later = engine(default("psu_path_resistance_rising"))
    assert later.restore_memory(memory, T0 + 3.6 * DAY).trend_series == 0
    assert later.export_memory().trends == ()


def test_a_link_that_retrained_slower_after_a_reboot_is_not_the_new_normal() -> None:
    before = engine(rules(SLOW_LINK))
    before.evaluate_data({"net": [{"name": "eth0", "speed_mbps": 40000}]}, [], T0)
    after = restart(before)
    (tr,) = after.evaluate_data({"net": [{"name": "eth0", "speed_mbps": 10000}]}, [], T0 + 60)
    assert (tr.change, tr.alarm.message) == ("firing", "eth0 at 10000 Mb/s, first 40000")
    # A fresh engine takes the slow speed as the first one.
    assert engine(rules(SLOW_LINK)).evaluate_data({"net": [{"name": "eth0", "speed_mbps": 10000}]}, [], T0) == []


def test_an_acknowledged_alarm_still_firing_continues_its_episode() -> None:
    before = engine(rules(RAIL))
    before.evaluate_data(rail(11.5), [], T0)
    before.evaluate_data(rail(11.5), [], T0 + 5)
    (alarm,) = before.active()
    assert alarm.state == "firing"
    before.acknowledge(alarm.id, "alice", T0 + 10)
    after = restart(before, now=T0 + 100)
    assert after.active() == ()  # firing is re-derived from fresh readings, not assumed
    (tr,) = after.evaluate_data(rail(11.55), [], T0 + 101)  # no second hold time: it had fired
    assert (tr.change, tr.previous, tr.restored) == ("firing", "firing", True)
    (now_alarm,) = after.active()
    assert (now_alarm.id, now_alarm.started_at, now_alarm.fired_at) == (alarm.id, T0, T0 + 5)
    assert (now_alarm.acknowledged_by, now_alarm.acknowledged_at) == ("alice", T0 + 10)
    # The episode keeps its worst reading from before the restart; "now" is the fresh one.
    assert now_alarm.value == 11.5 and now_alarm.message == "rail 11.5 V" and now_alarm.value_now == 11.55
    # From here on it is an ordinary alarm of the new run.
    (tr,) = after.evaluate_data(rail(12.0), [], T0 + 102)
    assert tr.change == "resolved" and not tr.restored and after.recent()[0].id == alarm.id


def test_an_alarm_that_cleared_while_the_agent_was_down_resolves() -> None:
    before = engine(rules(RAIL))
    for t in (0, 5):
        before.evaluate_data(rail(11.5), [], T0 + t)
    after = restart(before, now=T0 + 100)
    (tr,) = after.evaluate_data(rail(12.0), [], T0 + 101)
    assert (tr.change, tr.restored, tr.alarm.state) == ("resolved", True, "resolved")
    assert tr.alarm.message == "rail 11.5 V (clear after the agent restarted)"
    assert after.recent()[0].id == tr.alarm.id and after.active() == ()


def test_a_restored_alarm_never_reported_again_resolves_after_absent_resolve_s() -> None:
    before = engine(rules(RAIL))
    for t in (0, 5):
        before.evaluate_data(rail(11.5), [], T0 + t)
    after = restart(before, now=T0 + 100)
    assert after.evaluate_data({}, [], T0 + 100) == []
    assert after.evaluate_data({}, [], T0 + 159) == []
    (alarm,) = after.book.carried()
    assert after.book.get(alarm.id) == alarm
    (tr,) = after.evaluate_data({}, [], T0 + 160)  # the rule's absent_resolve_s (60 s), as for a live alarm
    assert tr.change == "resolved" and "not reported since the agent restarted" in tr.alarm.message
    assert after.recent()[0].id == alarm.id and after.book.carried() == ()


def test_a_restored_alarm_can_be_acknowledged_before_fresh_readings_decide() -> None:
    before = engine(rules(RAIL))
    for t in (0, 5):
        before.evaluate_data(rail(11.5), [], T0 + t)
    after = restart(before, now=T0 + 100)
    (alarm,) = after.book.carried()
    (tr,) = after.acknowledge(alarm.id, "bob", T0 + 100)
    assert tr.change == "acknowledged" and tr.alarm.acknowledged_by == "bob"
    after.evaluate_data(rail(11.5), [], T0 + 101)
    assert after.active()[0].acknowledged_by == "bob"


def test_pending_alarms_are_not_kept() -> None:
    before = engine(rules(RAIL))
    before.evaluate_data(rail(11.5), [], T0)
    assert before.active()[0].state == "pending" and before.export_memory().alarms == ()


def test_event_alarms_come_back_latched_until_they_expire() -> None:
    before = engine(default("gpu_xid_fatal"))
    before.evaluate_data({}, [event("xid", "gpu:1", "Xid 79 on GPU 1", xid=79)], T0)
    after = restart(before, now=T0 + 600)
    (alarm,) = after.active()  # an event is a fact, not a reading to re-derive
    assert alarm.subject == "gpu:1" and alarm.id.startswith("run1")
    (tr,) = after.evaluate_data({}, [], T0 + 3600)
    assert tr.change == "resolved"
    # Restored after its latch ran out, it goes straight to the recent list.
    late = restart(before, now=T0 + 4000)
    assert late.active() == () and late.recent()[0].id == alarm.id
    (tr,) = late.evaluate_data({}, [], T0 + 4001)  # and is announced as resolved, not dropped unseen
    assert (tr.change, tr.restored, tr.alarm.id) == ("resolved", True, alarm.id)


def test_recent_alarms_and_rules_no_longer_in_force() -> None:
    before = engine(rules(RAIL) + rules(SLOW_LINK))
    for t, v in ((0, 11.5), (5, 11.5), (6, 12.0), (7, 11.5), (12, 11.5)):
        before.evaluate_data(rail(v), [], T0 + t)
    assert len(before.recent()) == 1 and len(before.active()) == 1
    (firing,) = before.active()
    after = restart(before, rules(SLOW_LINK), now=T0 + 20)
    # The firing alarm of the rule taken out does not vanish: it resolves, saying why, and
    # the first evaluation announces it.
    ended, *older = after.recent()
    assert tuple(older) == before.recent()
    assert (ended.id, ended.state, ended.resolved_at) == (firing.id, "resolved", T0 + 20)
    assert ended.message == "rail 11.5 V (rule no longer in force after the agent restarted)"
    (tr,) = after.evaluate_data({}, [], T0 + 21)
    assert (tr.change, tr.restored, tr.alarm.id) == ("resolved", True, firing.id)
    assert after.evaluate_data({}, [], T0 + 22) == []
    summary = engine(rules(SLOW_LINK)).restore_memory(before.export_memory(), T0 + 20)
    assert summary.alarms == 0 and summary.recent == 1
    assert any("rule rail is no longer in force" in d for d in summary.dropped)


def test_a_counter_alarm_goes_on_across_a_restart() -> None:
    """Counter windows are not kept: the fresh window is no verdict, so the restored alarm
    is neither resolved nor fired again (with a new id, notified twice) a few seconds later."""
    def crc(total: int) -> dict[str, Any]:
        return {"gpus": [{"index": 2, "nvlinks": [{"link": 0, "crc_flit_total": 0},
                                                   {"link": 2, "crc_flit_total": total}]}]}

    before = engine(default("gpu_nvlink_crc_rising"))
    for t in range(0, 30, 5):
        before.evaluate_data(crc(8 * t), [], T0 + t)
    (alarm,) = before.active()
    after = restart(before, now=T0 + 40)
    changes = []
    for t in range(41, 50):
        changes += [(t, tr.change, tr.restored, tr.alarm.id) for tr in after.evaluate_data(crc(8 * t), [], T0 + t)]
    # The first frames rise by less than 10: no verdict; the third confirms the alarm.
    assert changes == [(43, "firing", True, alarm.id)]


RAIL_HELD = RAIL.replace("hold_s = 5.0", "hold_s = 5.0\nclear_hold_s = 30.0")


def test_a_clear_hold_in_progress_goes_on_across_a_restart() -> None:
    before = engine(rules(RAIL_HELD))
    for t, v in ((0, 11.5), (5, 11.5), (10, 12.0), (20, 12.0)):
        before.evaluate_data(rail(v), [], T0 + t)
    (alarm,) = before.active()
    assert before.export_memory().alarms[0].clear_since == T0 + 10
    after = restart(before, now=T0 + 25)
    (tr,) = after.evaluate_data(rail(12.0), [], T0 + 26)
    assert (tr.change, tr.restored, tr.alarm.id, tr.alarm.state) == ("firing", True, alarm.id, "firing")
    assert after.evaluate_data(rail(12.0), [], T0 + 39) == []
    (tr,) = after.evaluate_data(rail(12.0), [], T0 + 40)  # 30 s after it first cleared, before the restart
    assert (tr.change, tr.alarm.id) == ("resolved", alarm.id)


def test_a_restored_alarm_clear_on_fresh_readings_waits_for_its_clear_hold() -> None:
    """A sag that comes and goes: a restart in a clear moment does not resolve the alarm and
    fire it again at the next sag."""
    before = engine(rules(RAIL_HELD))
    for t in (0, 5):
        before.evaluate_data(rail(11.5), [], T0 + t)
    (alarm,) = before.active()
    after = restart(before, now=T0 + 100)
    seen = []
    for t, v in ((101, 12.0), (110, 11.5), (111, 12.0), (140, 12.0), (141, 12.0)):
        seen += [(t, tr.change, tr.alarm.id) for tr in after.evaluate_data(rail(v), [], T0 + t)]
    assert seen == [(101, "firing", alarm.id), (141, "resolved", alarm.id)]


STALE = """
[[rule]]
name = "stale"
kind = "staleness"
select = "collectors.*.sampled_at"
max_age_s = 120.0
subject = "collector:{key}"
message = "collector {key} silent {age_s:.0f} s"
"""

RAIL_WINDOW = """
[[rule]]
name = "rail_mean"
kind = "threshold"
select = "psu_rail.volts.min_volts"
aggregate = "mean"
window_s = 300.0
below = 11.7
subject = "psu"
message = "rail mean {value} V"
"""


def test_a_restored_staleness_alarm_is_not_resolved_while_its_frames_are_counted_again() -> None:
    """After a restart a still-silent collector's timestamp has stood still for one frame only:
    that is no verdict, not a clear that resolves the alarm and fires a new one frames later."""
    def frame(at: float) -> dict[str, Any]:
        return {"collectors": {"adc": {"sampled_at": at}}}
    before = engine(rules(STALE))
    changes = [tr.change for t in range(0, 400, 10) for tr in before.evaluate_data(frame(T0), [], T0 + t)]
    assert changes == ["firing"]
    (alarm,) = before.active()
    after = restart(before, now=T0 + 400)
    changes = []
    for t in range(400, 460, 10):
        changes += [(tr.change, tr.alarm.id) for tr in after.evaluate_data(frame(T0), [], T0 + t)]
    assert changes == [("firing", alarm.id)]  # the same episode goes on, once min_frames are counted
    # A collector that did come back resolves it at once.
    (tr,) = after.evaluate_data(frame(T0 + 460), [], T0 + 460)
    assert (tr.change, tr.alarm.id) == ("resolved", alarm.id)


def test_a_window_rule_refilling_its_window_does_not_count_its_subject_as_gone() -> None:
    before = engine(rules(RAIL_WINDOW))
    for t in range(0, 400, 10):
        before.evaluate_data(rail(11.5), [], T0 + t)
    (alarm,) = before.active()
    after = restart(before, now=T0 + 400)
    # Five minutes without a verdict (the window refills): carried and listed, neither resolved as
    # "not reported" after absent_resolve_s nor fired again under a new id.
    for t in range(400, 700, 10):
        assert after.evaluate_data(rail(11.5), [], T0 + t) == []
        assert [a.id for a in after.alarm_list().active] == [alarm.id]
    (tr,) = after.evaluate_data(rail(11.5), [], T0 + 700)
    assert (tr.change, tr.restored, tr.alarm.id) == ("firing", True, alarm.id)
