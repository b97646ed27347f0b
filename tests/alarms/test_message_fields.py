"""A rule's message may name other fields of the record its reading belongs to (``{expected_gbps}`` beside
a link's ``link_state``) and of the records around it (``{raid.name}`` of an md member's array). They are
read when the message is rendered (the alarm raised, or its reading or subject changed), never per frame
of a firing alarm; a field that is missing or ``None`` gives the rule's fallback."""

from __future__ import annotations

from typing import Any

import pytest

from rigmon.alarms import frame_reads
from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.record_fields import RecordChains, message_fields, record_chains
from rigmon.alarms.selector import Selector, parse_selector
from rigmon.alarms.templates import Template, render
from tests.alarms.helpers import T0, FakeClock, rules

LINK_RULE = """
[[rule]]
name = "tb_slow"
kind = "state"
severity = "warning"
select = "thunderbolt[*].link_state"
equals = "degraded"
subject = "link:{name}"
message = "link {name} at {rx_gbps:g} of {expected_gbps:g} Gb/s ({value})"
"""

MEMBER_RULE = """
[[rule]]
name = "member"
kind = "state"
severity = "critical"
select = "raid[*].members[*].role"
equals = "faulty"
subject = "disk:{name}"
message = "{name} of {raid.name} ({raid.level}, {raid.working_disks/1:g} working) is {value}"
"""


def link(state: str = "degraded", **kw: Any) -> dict[str, Any]:
    return {"thunderbolt": [{"name": "0-1", "link_state": state, "rx_gbps": 20.0, "expected_gbps": 40.0, **kw}]}


def active_messages(engine: AlarmEngine, data: dict[str, Any], t: float) -> list[str]:
    engine.evaluate_data(data, [], T0 + t)
    return [a.message for a in engine.active()]


def test_a_message_writes_the_sibling_fields_of_the_record_its_reading_belongs_to() -> None:
    engine = AlarmEngine(rules(LINK_RULE), "n1", FakeClock(T0))
    assert active_messages(engine, link(), 0) == ["link 0-1 at 20 of 40 Gb/s (degraded)"]


def test_a_message_writes_the_fields_of_the_record_around_it_by_its_step_s_name() -> None:
    engine = AlarmEngine(rules(MEMBER_RULE), "n1", FakeClock(T0))
    data = {"raid": [{"name": "md127", "uuid": "u-1", "level": "raid1", "working_disks": 1, "members": [
        {"name": "nvme1n1", "role": "faulty"}, {"name": "nvme2n1", "role": "in_sync"}]}]}
    assert active_messages(engine, data, 0) == ["nvme1n1 of md127 (raid1, 1 working) is faulty"]


@pytest.mark.parametrize("record", [
    {"expected_gbps": None},       # not read: the field is missing
    {"rx_gbps": "20 Gb/s"},        # not a number for :g
])
def test_a_missing_or_unfit_sibling_field_gives_the_fallback(record: dict[str, Any]) -> None:
    engine = AlarmEngine(rules(LINK_RULE), "n1", FakeClock(T0))
    assert active_messages(engine, link(**record), 0) == ["tb_slow: link:0-1 = degraded"]


def test_labels_and_the_value_come_before_record_fields_of_the_same_name() -> None:
    rule = LINK_RULE.replace('message = "link {name} at', 'message = "{value} {subject} {name} at')
    engine = AlarmEngine(rules(rule), "n1", FakeClock(T0))
    data = link(value="not me", subject="nor me")
    assert active_messages(engine, data, 0) == ["degraded link:0-1 0-1 at 20 of 40 Gb/s (degraded)"]


def test_the_figures_are_those_of_when_the_alarm_was_raised_or_its_state_changed() -> None:
    """The record's figures move every frame; the alarm's message moves with its reading (here the
    state) alone, so a firing alarm is not rewritten (nor re-sent) on every frame."""
    rule = LINK_RULE.replace('equals = "degraded"', 'one_of = ["degraded", "lost"]')
    engine = AlarmEngine(rules(rule), "n1", FakeClock(T0))
    assert active_messages(engine, link(rx_gbps=20.0), 0) == ["link 0-1 at 20 of 40 Gb/s (degraded)"]
    (before,) = engine.active()
    assert active_messages(engine, link(rx_gbps=10.0), 1) == ["link 0-1 at 20 of 40 Gb/s (degraded)"]
    assert engine.active() == (before,)
    assert active_messages(engine, link("lost", rx_gbps=5.0), 2) == ["link 0-1 at 5 of 40 Gb/s (lost)"]


def test_records_are_read_only_to_render_a_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """Quiet frames and frames of a firing alarm whose reading stays read no record for a message."""
    reads: list[str] = []

    def counted(selector: Selector, data: Any, memo: Any = None) -> RecordChains:
        reads.append(selector.text)
        return record_chains(selector, data, memo)

    monkeypatch.setattr(frame_reads, "record_chains", counted)
    engine = AlarmEngine(rules(LINK_RULE), "n1", FakeClock(T0))
    for t in range(5):
        engine.evaluate_data(link("ok"), [], T0 + t)
    assert reads == []
    for t in range(5, 10):
        engine.evaluate_data(link(rx_gbps=float(t)), [], T0 + t)
    assert reads == ["thunderbolt[*].link_state"]  # once: when it was raised


def test_record_chains_key_the_records_by_the_matches_subjects() -> None:
    data = {"raid": [{"name": "md0", "uuid": "u-0", "members": [{"name": "sda1", "role": "faulty"}]}]}
    selector = parse_selector("raid[*].members[*].role")
    (match,) = selector.select(data)
    chain = record_chains(selector, data)[match.subject]
    assert message_fields(chain) == {"raid.name": "md0", "raid.uuid": "u-0", "name": "sda1", "role": "faulty"}
    assert record_chains(parse_selector("taken_at"), {"taken_at": 1.0}) == {}


def test_a_dotted_field_given_whole_renders_and_otherwise_reads_an_attribute() -> None:
    assert render("{raid.name} of {raid.level}", {"raid.name": "md0", "raid.level": "raid1"}, "F") == "md0 of raid1"
    assert render("{raid.size/1000:g} kB", {"raid.size": 2500}, "F") == "2.5 kB"
    assert render("{value.real}", {"value": 3}, "F") == "3"
    assert render("{raid.name}", {}, "F") == "F"
    assert Template("{raid.name} {value/1000:g} {value.real}").names == (
        ("raid.name", "raid"), ("value", "value"), ("value.real", "value"))
    assert Template("{raid.name}").lacks({"raid": 1}) is False
    assert Template("{raid.name} {value}").lacks({"value": 1}) is True
