"""The rail ADC's default rules: a silent ADC (port open, no valid window) is ``psu_adc_silent``; an
unplugged one, whose reading is stale too (``connected`` false, the collector failing), is
``collector_failing`` alone."""

from __future__ import annotations

from tests.alarms.helpers import Step, default, run


def frames(connected: bool, state: str, seconds: int = 40) -> list[Step]:
    """A stale rail reading every second, from an ADC ``connected`` or not, its collector in ``state``."""
    return [Step(float(t), {"psu_rail": {"stale": True, "connected": connected, "volts": None},
                            "collectors": {"psu": {"state": state}}}) for t in range(seconds)]


def test_an_unplugged_adc_is_collector_failing_not_silent() -> None:
    """Its reading stale while the port is gone made psu_adc_silent fire beside collector_failing: two
    alarms for one unplug, the one saying the port is open but sends nothing."""
    engine, _ = run(default("psu_adc_silent", "collector_failing"), frames(connected=False, state="error"))
    assert {(a.rule, a.subject, a.state) for a in engine.active()} == {("collector_failing", "collector:psu", "firing")}


def test_a_silent_adc_with_its_port_open_is_psu_adc_silent() -> None:
    engine, _ = run(default("psu_adc_silent", "collector_failing"), frames(connected=True, state="ok"))
    assert {(a.rule, a.subject, a.state) for a in engine.active()} == {("psu_adc_silent", "psu", "firing")}


def test_a_silent_adc_unplugged_then_back_and_sending_resolves() -> None:
    """Firing while silent; the port gone meanwhile is not a verdict; back and sending, it clears."""
    steps = frames(connected=True, state="ok", seconds=20)
    steps += [Step(20.0 + t, s.data) for t, s in enumerate(frames(connected=False, state="error", seconds=10))]
    steps += [Step(30.0 + t, {"psu_rail": {"stale": False, "connected": True, "volts": {"min_volts": 12.0}},
                              "collectors": {"psu": {"state": "ok"}}}) for t in range(40)]
    engine, seen = run(default("psu_adc_silent"), steps)
    assert [(change, subject) for _, change, subject in seen] == [
        ("pending", "psu"), ("firing", "psu"), ("resolved", "psu")]
    assert not engine.active()
