"""A notification writes a reading as the dashboard does (one implementation,
`rigmon.alarms.message_values`): the alarm message's unit and decimals."""

from __future__ import annotations

import pytest

from rigmon.alarms.message_values import reading_text
from rigmon.notify.payload import Notification, resolution, summary
from rigmon.schema import Alarm, EventValue
from tests.alarms.helpers import T0


def resolved(message: str, value: EventValue, value_now: EventValue, rule_kind: str = "threshold") -> Alarm:
    return Alarm(id="a1", rule="r", rule_kind=rule_kind, severity="warning", node="node01", subject="psu",
                 state="resolved", message=message, started_at=T0, updated_at=T0 + 60, value=value,
                 fired_at=T0, resolved_at=T0 + 60, value_now=value_now, resolve_reason="cleared")


@pytest.mark.parametrize(("message", "value", "now", "written"), [
    ("12 V rail minimum 11.255 V is below 11.7 V", 11.255, 11.92, "11.920 V"),
    ("GPU 0 at 91 °C is above 90 °C", 91, 84.6, "85 °C"),
    # The dashboard's charts write a resistance in Ω; so may a rule's message.
    ("path psu->gpu0 resistance rises 0.120 mΩ/day", 0.12, 0.0351, "0.035 mΩ/day"),
])
def test_a_resolved_notification_writes_its_reading_as_the_dashboard_does(
        message: str, value: float, now: float, written: str) -> None:
    alarm = resolved(message, value, now)
    assert reading_text(alarm, now) == written
    fresh, phrase, _ = resolution(alarm)
    assert fresh and phrase == f"now {written}"
    assert summary(Notification("resolved", alarm)).startswith(f"[RESOLVED] node01 psu: now {written}; was: ")


@pytest.mark.parametrize(("now", "written"), [
    (123456789, "123456789"),      # a counter in full, not {:g}'s 1.23457e+08
    (123456789.5, "123456789.5"),
    (11.60834, "11.6083"),
    (3.0, "3"),
])
def test_a_reading_the_message_does_not_write_is_given_in_full(now: float, written: str) -> None:
    alarm = resolved("counter xyz rose", 7, now, rule_kind="counter")
    assert reading_text(alarm, now) == written
