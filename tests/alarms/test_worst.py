"""An alarm keeps its worst observation: value and message never get better while it is
pending, firing or held; ``value_now`` follows the readings."""

from __future__ import annotations

from typing import Any

import pytest

from rigmon.alarms.cluster import ClusterRule, PeerCheck, peer_outliers
from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.lifecycle import AlarmBook
from rigmon.alarms.observations import is_worse
from rigmon.schema import Alarm
from tests.alarms.helpers import T0, FakeClock, default, rules


def rail_step(volts: float) -> dict[str, Any]:
    return {"psu_rail": {"volts": {"mean_volts": volts + 0.3, "min_volts": volts, "max_volts": volts + 0.4}}}


def replay_step(total: int) -> dict[str, Any]:
    return {"gpus": [{"index": 0, "pcie_replay_total": total}]}


def _never_better(alarms: list[Alarm], lower_is_worse: bool) -> None:
    """Each alarm snapshot's value is at least as bad as the one before, and its message is
    the message of that worst value."""
    for before, after in zip(alarms, alarms[1:]):
        assert isinstance(before.value, (int, float)) and isinstance(after.value, (int, float))
        if lower_is_worse:
            assert after.value <= before.value
        else:
            assert after.value >= before.value
        if after.value == before.value:
            assert after.message == before.message


# A rail that sags to 11.26 V, recovers partly (still firing), and then clears into the
# 60 s clear hold: the rail rules' value and message stay at 11.26 V throughout.
RAIL_VOLTS = (11.65, 11.26, 11.42, 11.53, 11.48, 11.9, 12.0, 12.02, 11.95, 12.01)


@pytest.mark.parametrize("rule", ["psu_rail_low_warning", "psu_rail_low_critical"])
def test_a_rail_alarm_keeps_its_lowest_minimum_while_firing_and_held(rule: str) -> None:
    clock = FakeClock(T0)
    engine = AlarmEngine(default(rule), "n1", clock)
    seen: list[Alarm] = []
    for i, volts in enumerate(RAIL_VOLTS):
        engine.evaluate_data(rail_step(volts), [], T0 + i)
        seen.extend(engine.active())
    assert len({a.id for a in seen}) == 1, "one episode"
    _never_better(seen, lower_is_worse=True)
    last = seen[-1]
    assert last.value == 11.26 and "11.260 V" in last.message
    assert last.worst_at == T0 + 1
    assert last.value_now == RAIL_VOLTS[-1]  # held: the rail is clear now, the alarm says so apart


def test_the_resolved_rail_alarm_keeps_the_worst_value() -> None:
    clock = FakeClock(T0)
    engine = AlarmEngine(default("psu_rail_low_critical"), "n1", clock)
    for i, volts in enumerate((11.45, 11.26, 11.48) + (12.0,) * 70):
        engine.evaluate_data(rail_step(volts), [], T0 + i)
    (resolved,) = engine.recent()
    assert resolved.value == 11.26 and "11.260 V" in resolved.message


def test_a_counter_alarm_keeps_its_largest_increase() -> None:
    rule = rules("""
[[rule]]
name = "replays"
kind = "counter"
select = "gpus[*].pcie_replay_total"
max_increase = 10
window_s = 60.0
clear_hold_s = 120.0
subject = "gpu:{index}"
message = "GPU {index} replays +{increase:.0f}"
""")
    engine = AlarmEngine(rule, "n1", FakeClock(T0))
    seen: list[Alarm] = []
    totals = [0, 5, 40, 90, 95, 96, 96, 96, 96, 96, 96]
    for i, total in enumerate(totals):
        engine.evaluate_data(replay_step(total), [], T0 + i * 10)
        seen.extend(engine.active())
    _never_better(seen, lower_is_worse=False)
    assert seen[-1].value == 96 and seen[-1].message == "GPU 0 replays +96" and seen[-1].value_now == 1


def test_a_rising_value_while_pending_fires_with_the_worst() -> None:
    rule = rules("""
[[rule]]
name = "rail"
kind = "threshold"
select = "psu_rail.volts.min_volts"
below = 11.7
hold_s = 3.0
subject = "psu"
message = "rail {value:.2f} V"
""")
    engine = AlarmEngine(rule, "n1", FakeClock(T0))
    for i, volts in enumerate((11.6, 11.3, 11.55, 11.6)):
        engine.evaluate_data(rail_step(volts), [], T0 + i)
    (alarm,) = engine.active()
    assert (alarm.state, alarm.value, alarm.message, alarm.value_now) == ("firing", 11.3, "rail 11.30 V", 11.6)


def test_a_peer_alarm_keeps_its_lowest_figure_and_reads_as_a_sentence() -> None:
    check = PeerCheck(name="gpu_power_below_peers", select="gpus[*].power_w", aggregate="sum", direction="below",
                      min_deviation=150.0, label="GPU power (all GPUs)", unit="W", digits=0, hold_s=0.0)
    book = AlarmBook("cluster")
    rule = ClusterRule(check.name, check.severity)

    def frames(low: float) -> dict[str, Any]:
        return {n: {"gpus": [{"index": 0, "power_w": w}]} for n, w in
                (("a", 1000.0), ("b", 1010.0), ("c", 1020.0), ("d", low))}

    for i, low in enumerate((700.0, 600.0, 800.0)):
        book.observe(rule, peer_outliers(frames(low), check), T0 + i)
    (alarm,) = book.active()
    assert alarm.value == 600.0
    assert alarm.message == "d GPU power (all GPUs) 600 W is below its peers' median of 1005 W"
    assert alarm.value_now == 800.0


@pytest.mark.parametrize(("new", "old", "worse", "expected"), [
    (11.2, 11.3, "lower", True), (11.3, 11.2, "lower", False), (5, 3, "higher", True), (3, 3, "higher", False),
    ("lost", "ok", None, False), (3, None, "higher", True), ("x", 3, "higher", False), (True, 0, "higher", False),
])
def test_is_worse(new: Any, old: Any, worse: Any, expected: bool) -> None:
    assert is_worse(new, old, worse) is expected


def test_the_usb4_alarm_names_the_link_once() -> None:
    engine = AlarmEngine(default("thunderbolt_degraded"), "n1", FakeClock(T0))
    link = {"name": "0-1", "vendor": "OWC", "device_name": "Express 1M2", "link_state": "degraded",
            "degraded_reason": "20 Gb/s below expected 40 Gb/s"}
    engine.evaluate_data({"thunderbolt": [link]}, [], T0)
    (alarm,) = engine.active()
    assert alarm.message == ("Thunderbolt/USB4 link 0-1 at 20 Gb/s below expected 40 Gb/s: "
                             "re-plug both ends, try another cable or port")


def test_a_degraded_link_whose_router_names_are_unread_still_gets_its_figures() -> None:
    """The message named the router's vendor and device name: a router whose names the collector could
    not read (null) gave the fallback "thunderbolt_degraded: link:0-1 = degraded", without the speeds."""
    engine = AlarmEngine(default("thunderbolt_degraded"), "n1", FakeClock(T0))
    link = {"name": "0-1", "vendor": None, "device_name": None, "link_state": "degraded",
            "degraded_reason": "20 Gb/s below expected 40 Gb/s"}
    engine.evaluate_data({"thunderbolt": [link]}, [], T0)
    (alarm,) = engine.active()
    assert "20 Gb/s below expected 40 Gb/s" in alarm.message
