"""The default ``net_link_slower`` rule writes a link's speed in Gb/s, as every screen does, while the
alarm's value stays the reading (Mb/s, as ``speed_mbps`` and its Prometheus mirror); a template may
divide a field to write it in a larger unit (``{value/1000:g}``)."""

from __future__ import annotations

import pytest

from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.message_values import reading_text
from rigmon.alarms.templates import Template, check_template, render
from tests.alarms.helpers import T0, FakeClock, default


def test_a_slower_link_s_alarm_says_gb_s_and_keeps_its_value_in_mb_s() -> None:
    engine = AlarmEngine(default("net_link_slower"), "strix-1", FakeClock(T0), id_prefix="x")
    fired = []
    for t, speed in enumerate([40000] * 3 + [20000] * 12):
        data = {"net": [{"name": "thunderbolt0", "speed_mbps": speed}]}
        fired += [tr.alarm for tr in engine.evaluate_data(data, [], T0 + t) if tr.change == "firing"]
    (alarm,) = fired
    # Before: "link thunderbolt0 runs at 20000 Mb/s, first seen at 40000 Mb/s".
    assert alarm.message == "link thunderbolt0 runs at 20 Gb/s, first seen at 40 Gb/s"
    assert alarm.value == 20000 and alarm.subject == "link:thunderbolt0"
    # Where it is now, as its message writes its speed (the dashboard's panel, a resolved notification).
    assert reading_text(alarm, 40000) == "40 Gb/s"
    assert reading_text(alarm, 2500) == "2.5 Gb/s"


@pytest.mark.parametrize(("template", "fields", "text"), [
    ("{value/1000:g} Gb/s", {"value": 2500}, "2.5 Gb/s"),
    ("{value/1000:.1f} kW of {limit}", {"value": 1234, "limit": 2000}, "1.2 kW of 2000"),
    # A field that is not a number does not fit: the fallback.
    ("{value/1000:g} Gb/s", {"value": "down"}, "FALLBACK"),
    ("{value/1000:g} Gb/s", {"value": True}, "FALLBACK"),
    ("{speed/1000:g} Gb/s", {"value": 1}, "FALLBACK"),
])
def test_a_divided_field_renders_the_same_compiled_or_not(template: str, fields: dict[str, object],
                                                          text: str) -> None:
    check_template(template)
    assert Template(template).compiled
    assert Template(template).render(fields, "FALLBACK") == render(template, fields, "FALLBACK") == text


@pytest.mark.parametrize("template", ["{value/0:g}", "{value/x}", "{value/-1000}", "{value/}"])
def test_a_divisor_that_is_no_positive_number_is_refused(template: str) -> None:
    with pytest.raises(ValueError, match="divide by a positive number"):
        check_template(template)
