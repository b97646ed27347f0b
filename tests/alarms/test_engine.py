"""Rule engine, table-driven on an injected clock: thresholds, hysteresis, hold, flapping,
state, staleness, trend, missing data, message templates."""

from __future__ import annotations

from typing import Any

import pytest

from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.templates import Template, render
from rigmon.schema import SCHEMA_VERSION, CollectorStatus, Frame, NetInterfaceReading, Readings
from tests.alarms.helpers import RAIL, T0, FakeClock, Step, default, gpu_states, rules, run


def psu(*volts: float | None, every_s: float = 1.0) -> list[Step]:
    return [Step(i * every_s, {} if v is None else {"psu_rail": {"volts": {"min_volts": v}}}) for i, v in enumerate(volts)]


def rail(*volts: float) -> list[Step]:
    """Frames shaped like the PSU collector's reading (``readings.psu_rail.volts.min_volts``)."""
    return [Step(float(i), {"psu_rail": {"volts": {"mean_volts": v, "min_volts": v, "max_volts": v}}})
            for i, v in enumerate(volts)]


CASES: list[tuple[str, str, list[Step], list[tuple[float, str, str]]]] = [
    ("fires below, resolves above", RAIL, psu(12.0, 11.6, 11.6, 11.8),
     [(1, "firing", "psu"), (3, "resolved", "psu")]),
    ("exactly at the limit is not below", RAIL, psu(11.7, 11.7), []),
    ("without hysteresis a value at the limit flaps", RAIL, psu(11.69, 11.71, 11.69, 11.71),
     [(0, "firing", "psu"), (1, "resolved", "psu"), (2, "firing", "psu"), (3, "resolved", "psu")]),
    ("hysteresis holds through the band and clears past it", RAIL + "hysteresis = 0.05\n",
     psu(11.69, 11.71, 11.69, 11.74, 11.75),
     [(0, "firing", "psu"), (4, "resolved", "psu")]),
    ("hold time: pending, then firing once held", RAIL + "hold_s = 5.0\n", psu(11.6, 11.6, 11.6, 11.6, 11.6, 11.6),
     [(0, "pending", "psu"), (5, "firing", "psu")]),
    ("hold time: a short sag never fires", RAIL + "hold_s = 5.0\n", psu(11.6, 11.6, 12.0, 11.6),
     [(0, "pending", "psu"), (2, "resolved", "psu"), (3, "pending", "psu")]),
    ("clear hold: must stay clear before resolving", RAIL + "clear_hold_s = 3.0\n", psu(11.6, 12.0, 11.6, 12.0, 12.0,
                                                                                          12.0, 12.0),
     [(0, "firing", "psu"), (6, "resolved", "psu")]),
    ("missing data never fires", RAIL, psu(None, None, None), []),
    ("a firing alarm whose data vanishes resolves after absent_resolve_s", RAIL + "absent_resolve_s = 2.0\n",
     psu(11.6, None, None, None), [(0, "firing", "psu"), (3, "resolved", "psu")]),
    ("data coming back in time keeps it firing", RAIL + "absent_resolve_s = 2.0\n",
     psu(11.6, None, 11.6, None, 11.6), [(0, "firing", "psu")]),
    ("text is not a number", RAIL, [Step(0, {"psu_rail": {"volts": {"min_volts": "11.2"}}})], []),
]


@pytest.mark.parametrize(("name", "text", "steps", "expected"), CASES, ids=[c[0] for c in CASES])
def test_threshold(name: str, text: str, steps: list[Step], expected: list[tuple[float, str, str]]) -> None:
    assert run(rules(text), steps)[1] == expected


def test_threshold_on_the_window_minimum() -> None:
    text = """
[[rule]]
name = "cpu_hot"
kind = "threshold"
select = "host.cpu_pct"
above = 90.0
aggregate = "min"
window_s = 3.0
subject = "cpu"
"""
    steps = [Step(t, {"host": {"cpu_pct": v}}) for t, v in enumerate([95, 50, 95, 95, 95, 95, 80])]
    # The minimum over 3 s only exceeds 90 once the 50 has left the window.
    assert run(rules(text), steps)[1] == [(5, "firing", "cpu"), (6, "resolved", "cpu")]


def test_default_rail_rules_warning_then_critical() -> None:
    steps = rail(12.02, 11.65, 11.42, 11.6, 11.9)
    steps += [Step(t, rail(v)[0].data) for t, v in ((30.0, 11.45), (31.0, 11.9), (90.0, 11.9), (91.0, 12.0))]
    engine, seen = run(default("psu_rail_low_warning", "psu_rail_low_critical"), steps)
    # 11.6 V is past the critical limit plus its 0.05 V hysteresis, not yet past the warning's;
    # a sag again within the 60 s clear hold goes on with the same alarms, which resolve
    # once the rail has been clear for 60 s.
    assert seen == [(1, "firing", "psu"), (2, "firing", "psu"), (91, "resolved", "psu"), (91, "resolved", "psu")]
    assert [a.rule for a in engine.recent()] == ["psu_rail_low_critical", "psu_rail_low_warning"]


def test_default_rail_messages_never_round_a_sag_up_to_its_limit() -> None:
    """The ADC reads to the millivolt: a minimum of 11.695 V (or 11.499 V) is below 11.7 V (11.5 V),
    and the message must not say "11.70 V is below 11.7 V"."""
    engine, _ = run(default("psu_rail_low_warning", "psu_rail_low_critical"), rail(12.02, 11.695, 11.499))
    messages = {a.rule: a.message for a in engine.active()}
    assert messages["psu_rail_low_warning"] == "12 V rail minimum 11.499 V is below 11.7 V"
    assert messages["psu_rail_low_critical"] == \
        "12 V rail minimum 11.499 V is below 11.5 V: GPUs fall off the bus here"
    engine, _ = run(default("psu_rail_low_warning"), rail(12.02, 11.695))
    assert engine.active()[0].message == "12 V rail minimum 11.695 V is below 11.7 V"


def test_state_one_alarm_per_gpu() -> None:
    engine, seen = run(default("gpu_lost"), [Step(0, gpu_states("ok", "ok")), Step(1, gpu_states("ok", "lost")),
                                             Step(2, gpu_states("lost", "lost"))])
    assert seen == [(1, "firing", "gpu:1"), (2, "firing", "gpu:0")]
    assert {a.message for a in engine.active()} == {"GPU 0 is lost (fell off the bus)",
                                                    "GPU 1 is lost (fell off the bus)"}
    assert {a.severity for a in engine.active()} == {"critical"}


def md(state: str, failed: int) -> dict[str, Any]:
    members = [{"name": f"nvme{i}n1", "role": "faulty" if i < failed else "in_sync"} for i in range(2)]
    return {"raid": [{"name": "md0", "health": state, "members": members}]}


def test_md_defaults() -> None:
    engine, seen = run(default("md_array_degraded", "md_array_broken", "md_member_failed"),
                       [Step(0, md("clean", 0)), Step(1, md("degraded", 1)), Step(2, md("broken", 1)),
                        Step(3, md("clean", 0))])
    assert seen == [(1, "firing", "md:md0"), (1, "firing", "disk:nvme0n1"), (2, "resolved", "md:md0"),
                    (2, "firing", "md:md0"), (3, "resolved", "md:md0"), (3, "resolved", "disk:nvme0n1")]
    assert [a.rule for a in engine.recent()] == ["md_member_failed", "md_array_broken", "md_array_degraded"]


def test_collector_failing_with_hold_and_hung() -> None:
    def col(host: str, gpu: str) -> dict[str, Any]:
        return {"collectors": {"host": {"state": host}, "gpu": {"state": gpu}}}

    _, seen = run(default("collector_failing", "collector_hung"),
                  [Step(0, col("ok", "error")), Step(5, col("ok", "error")), Step(10, col("ok", "error")),
                   Step(11, col("ok", "hung")), Step(12, col("ok", "ok")), Step(40, col("ok", "ok")),
                   Step(41, col("ok", "ok")), Step(42, col("ok", "ok"))])
    # Each resolves once clear for its 30 s clear hold.
    assert seen == [(0, "pending", "collector:gpu"), (10, "firing", "collector:gpu"),
                    (11, "firing", "collector:gpu"), (41, "resolved", "collector:gpu"),
                    (42, "resolved", "collector:gpu")]


def links(**speeds: int) -> dict[str, Any]:
    return {"net": [{"name": n, "speed_mbps": s} for n, s in speeds.items()]}


def test_link_below_first_seen_speed() -> None:
    text = """
[[rule]]
name = "slow"
kind = "state"
select = "net[*].speed_mbps"
below_first_seen = true
subject = "link:{name}"
message = "{name} at {value} Mb/s, first {first_seen}"
"""
    engine, seen = run(rules(text), [Step(0, links(eth0=40000, eth1=10000)), Step(1, links(eth0=10000, eth1=10000)),
                                     Step(2, links(eth0=40000, eth1=10000))])
    assert seen == [(1, "firing", "link:eth0"), (2, "resolved", "link:eth0")]
    assert engine.recent()[0].message == "eth0 at 10000 Mb/s, first 40000"


def test_link_below_configured_speed() -> None:
    text = """
[[rule]]
name = "slow"
kind = "state"
select = "net[*].speed_mbps"
expected = { eth0 = 40000 }
"""
    _, seen = run(rules(text), [Step(0, links(eth0=10000, eth1=10))])
    assert seen == [(0, "firing", "net[name=eth0]")]


def test_vanished_against_inventory_guarded_by_its_collector() -> None:
    text = """
[[rule]]
name = "gpu_missing"
kind = "state"
select = "gpus[*].uuid"
vanished = true
collector = "gpu"
subject = "gpu:{uuid}"
"""

    def frame(gpu_state: str, *states: str) -> dict[str, Any]:
        return {**gpu_states(*states), "collectors": {"gpu": {"state": gpu_state}}}

    _, seen = run(rules(text), [Step(0, frame("ok", "ok", "ok")), Step(1, frame("error")),
                                Step(2, {"collectors": {"gpu": {"state": "ok"}}, "gpus": gpu_states("ok")["gpus"]}),
                                Step(3, frame("ok", "ok", "ok"))])
    # A failing collector reports no GPUs: that is not every GPU vanishing.
    assert seen == [(2, "firing", "gpu:GPU-1"), (3, "resolved", "gpu:GPU-1")]


def test_staleness() -> None:
    def col(sampled_at: float | None) -> dict[str, Any]:
        return {"collectors": {"host": {"state": "ok", "sampled_at": sampled_at}}}

    _, seen = run(default("collector_silent"), [Step(0, col(T0)), Step(100, col(T0)), Step(121, col(T0)),
                                                Step(130, col(None)), Step(131, col(T0 + 131))])
    assert seen == [(121, "firing", "collector:host"), (131, "resolved", "collector:host")]


def test_staleness_follows_each_collectors_own_interval() -> None:
    """A collector run every 300 s (a slow SMART read) is silent after 3 x 300 s, not 120 s."""
    def cols(at: float) -> dict[str, Any]:
        return {"collectors": {name: {"state": "ok", "sampled_at": at} for name in ("host", "nvme", "journal")}}

    clock = FakeClock(T0)
    engine = AlarmEngine(default("collector_silent"), "n1", clock, intervals={"host": 1.0, "nvme": 300.0})
    seen = []
    for t in (0.0, 100.0, 121.0, 299.0, 899.0, 901.0):
        seen += [(t, tr.change, tr.alarm.subject) for tr in engine.evaluate_data(cols(T0), [], T0 + t)]
    # host and journal (no interval known: the plain 120 s) at 121 s, nvme only past 900 s.
    assert seen == [(121.0, "firing", "collector:host"), (121.0, "firing", "collector:journal"),
                    (901.0, "firing", "collector:nvme")]
    nvme = next(a for a in engine.active() if a.subject == "collector:nvme")
    assert nvme.message == "collector nvme has not reported for 901 s (limit 900 s)"
    # Without intervals (the dashboard, rigmon check) the rule is the plain 120 s.
    assert [tr.alarm.subject for tr in AlarmEngine(default("collector_silent"), "n1", clock).evaluate_data(
        cols(T0), [], T0 + 121)] == []  # needs min_frames evaluations first
    plain = AlarmEngine(default("collector_silent"), "n1", clock)
    for t in (0.0, 100.0, 121.0):
        last = plain.evaluate_data(cols(T0), [], T0 + t)
    assert sorted(tr.alarm.subject for tr in last) == ["collector:host", "collector:journal", "collector:nvme"]


def test_staleness_needs_a_timestamp_that_stands_still() -> None:
    """On an accelerated clock every sample is old by the time it is judged, yet fresh."""
    def col(sampled_at: float) -> dict[str, Any]:
        return {"collectors": {"host": {"state": "ok", "sampled_at": sampled_at}}}

    steps = [Step(i * 20000.0, col(T0 + i * 20000.0 - 15000.0)) for i in range(1, 6)]
    assert run(default("collector_silent"), steps)[1] == []


DAY = 86400.0


def resistance(slope_per_day: float, days: float, every_s: float = 300.0, base: float = 1.5) -> list[Step]:
    n = int(days * DAY / every_s)
    return [Step(i * every_s, {"path_resistance": [{"path": "adc", "resistance_mohm":
                                                    base + slope_per_day * i * every_s / DAY}]})
            for i in range(n + 1)]


def test_trend_rising_resistance_fires_once_a_day_of_history_shows_it() -> None:
    engine, seen = run(default("psu_path_resistance_rising"), resistance(0.2, 2.0))
    assert len(seen) == 1 and seen[0][1:] == ("firing", "psu:adc")
    assert DAY <= seen[0][0] <= DAY + 1200  # min_span_s of one day, to a bucket
    value = engine.active()[0].value
    assert isinstance(value, float) and 0.19 < value < 0.21


@pytest.mark.parametrize("slope", [0.0, -0.3, 0.03])
def test_trend_flat_or_falling_or_slow_never_fires(slope: float) -> None:
    assert run(default("psu_path_resistance_rising"), resistance(slope, 3.0))[1] == []


def test_trend_resolves_when_the_rise_stops() -> None:
    steps = resistance(0.5, 2.0)
    top = 1.5 + 0.5 * 2.0
    steps += [Step(2 * DAY + i * 300.0, {"path_resistance": [{"path": "adc", "resistance_mohm": top}]}) for i in range(1, int(3 * DAY / 300))]
    seen = run(default("psu_path_resistance_rising"), steps)[1]
    assert [s[1] for s in seen] == ["firing", "resolved"]


def test_bad_message_template_falls_back_and_never_raises() -> None:
    text = RAIL + 'message = "{value:.2f} {nonexistent}"\n'
    engine, seen = run(rules(text), psu(11.5))
    assert seen == [(0, "firing", "psu")]
    assert engine.active()[0].message == "rail: psu = 11.5"


def test_evaluate_reads_a_real_frame() -> None:
    clock = FakeClock(T0)
    engine = AlarmEngine(default("collector_failing", "net_link_slower"), "n1", clock)

    def frame(seq: int, speed: int, state: str) -> Frame:
        nic = NetInterfaceReading(
            name="eth0", operstate="up", carrier=True, speed_mbps=speed, mtu=1500, rx_bytes_total=0,
            tx_bytes_total=0, rx_packets_total=0, tx_packets_total=0, rx_errors_total=0, tx_errors_total=0,
            rx_dropped_total=0, tx_dropped_total=0, carrier_changes_total=1, rx_bytes_per_s=None,
            tx_bytes_per_s=None, rx_packets_per_s=None, tx_packets_per_s=None)
        return Frame(schema=SCHEMA_VERSION, node="n1", run_id="r", seq=seq, taken_at=T0 + seq * 5, agent_start=T0,
                     collectors={"host": CollectorStatus(state=state, ok=state == "ok")},  # type: ignore[arg-type]
                     readings=Readings(net=(nic,)))

    seen = [(t.change, t.alarm.rule, t.alarm.subject)
            for seq, (speed, state) in enumerate([(10000, "ok"), (1000, "ok"), (1000, "ok"), (1000, "error"),
                                                  (1000, "error"), (1000, "error")])
            for t in engine.evaluate(frame(seq, speed, state))]
    # Frames are 5 s apart; both rules hold for 10 s.
    assert seen == [("pending", "net_link_slower", "link:eth0"), ("pending", "collector_failing", "collector:host"),
                    ("firing", "net_link_slower", "link:eth0"), ("firing", "collector_failing", "collector:host")]


TEMPLATES = ["gpu:{index}", "collector:{key}", "psu", "", "{value:.2f} V below {below}", "{{literal}} {index}",
             "{value:>8}|", "{missing}", "{index.real}", "{0}", "{}", "{value!r}", "{value:{width}}", "{", "}",
             "{value:.2f}", "{name:d}", "{index}{index}", "caf\u00e9 {name}", "{class}", "{value:%}"]
FIELDS: list[dict[str, Any]] = [
    {"index": "0", "key": "host", "value": 11.4321, "below": 11.7, "name": "eth0", "width": 6, "class": "c"},
    {"index": "3", "value": None, "name": "md0"},
    {"value": "text", "below": True},
    {},
]


@pytest.mark.parametrize("text", TEMPLATES)
def test_a_compiled_template_renders_exactly_as_the_formatter(text: str) -> None:
    template = Template(text)
    for fields in FIELDS:
        assert template.render(fields, "FALLBACK") == render(text, fields, "FALLBACK"), fields


def test_the_default_rules_templates_all_take_the_fast_path() -> None:
    for rule in default("collector_silent", "psu_rail_low_warning", "gpu_pcie_replay_rising", "net_link_slower"):
        assert Template(rule.subject).compiled and Template(rule.message).compiled
    assert not Template("{value!r}").compiled and not Template("{gpu.index}").compiled
