"""A divided template field renders with a conversion, a format spec or a divisor written with a decimal
point, as a plain one does, compiled or not; one that divides and then reads an attribute is refused when
the rule loads, naming the rule and the key."""

from __future__ import annotations

import pytest
from msgspec.structs import replace

from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.rules import RuleError, parse_rules
from rigmon.alarms.templates import Template, check_template, render
from tests.alarms.helpers import T0, FakeClock, default


@pytest.mark.parametrize(("template", "text"), [
    ("{value/1000!r} Gb/s", "20.0 Gb/s"),
    ("{value/1000!s:>6} Gb/s", "  20.0 Gb/s"),
    ("{value/2.5!r}", "8000.0"),
    ("{value/1000.0!r} Gb/s", "20.0 Gb/s"),
    ("{value/1000.0:{width}.1f}|", "  20.0|"),
    ("{value/0.5} of {name!r}", "40000.0 of 'tb0'"),
    # Not a number, or no such field: the fallback, as before.
    ("{name/2.5!r}", "FALLBACK"),
    ("{speed/2.5!r}", "FALLBACK"),
])
def test_a_divided_field_takes_conversions_specs_and_decimal_divisors(template: str, text: str) -> None:
    """Before: {value/2.5!r}, {value/1000.0!r} and a nested spec gave the fallback: the general formatter
    split the field at the divisor's "." and looked for an attribute."""
    check_template(template)
    fields = {"value": 20000, "name": "tb0", "width": 6}
    assert Template(template).render(fields, "FALLBACK") == render(template, fields, "FALLBACK") == text


def test_a_rule_writing_its_value_divided_with_a_conversion_says_it() -> None:
    (rule,) = default("net_link_slower")
    rule = replace(rule, message="link {name} runs at {value/1000.0!r} Gb/s, first seen at {first_seen/1e3!r} Gb/s")
    engine = AlarmEngine((rule,), "strix-1", FakeClock(T0), id_prefix="x")
    fired = []
    for t, speed in enumerate([40000] * 3 + [20000] * 12):
        data = {"net": [{"name": "thunderbolt0", "speed_mbps": speed}]}
        fired += [tr.alarm for tr in engine.evaluate_data(data, [], T0 + t) if tr.change == "firing"]
    (alarm,) = fired
    assert alarm.message == "link thunderbolt0 runs at 20.0 Gb/s, first seen at 40.0 Gb/s"


def test_a_divided_field_read_further_is_refused_at_load_naming_the_rule_and_key() -> None:
    text = ('[[rule]]\nname = "slow"\nkind = "state"\nselect = "net[*].speed_mbps"\nbelow_first_seen = true\n'
            'message = "{value/2.5.real}"\n')
    with pytest.raises(RuleError, match=r"rules\.toml \(rule #1\): rule 'slow': message: field "
                                        r"\{value/2\.5\.real\}: divide by a positive number"):
        parse_rules(text, "rules.toml")
