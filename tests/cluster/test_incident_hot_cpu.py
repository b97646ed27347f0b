"""A node whose CPU cooler failed (scenario cpu-cooler-failed): its package at TjMax is a problem of a
few words, explaining the agent's host_temp_critical alarm, not that alarm's long message repeated."""

from __future__ import annotations

from rigmon.cluster.incident import problems, reason, timeline
from rigmon.schema import Alarm
from rigmon.tui.event_merge import merge_xid_events
from tests.cluster.test_incident import store_of


def test_a_package_at_its_critical_limit_is_said_in_a_few_words_and_explains_its_alarm() -> None:
    store = store_of("cpu-cooler-failed")
    frame = store.latest
    assert frame is not None
    assert reason(store.view().problems) == "coretemp Package id 0 at its critical limit, 100 °C ≥ 100"
    assert store.view().problems[0].level == "bad"
    firing = next(e for e in store.events if e.kind == "alarm_firing" and e.data.get("rule") == "host_temp_critical")
    alarm = Alarm(id=str(firing.data["alarm_id"]), rule="host_temp_critical", rule_kind="state", severity="critical",
                  node="node01", subject=firing.subject, state="firing", message=firing.message.split(": ", 1)[1],
                  started_at=firing.at, updated_at=firing.at, value=True, fired_at=firing.at)
    found = problems(frame, None, [alarm])
    # Named as libsensors names it, the same every boot (recorded after temperatures were; before: hwmon0/temp1).
    assert [p.subject for p in found] == ["temp:coretemp-isa-0000/Package id 0"]
    assert not any("check its cooler" in p.text for p in found)
    # The timeline tells it once, as the alarm fired (no hardware event of its own).
    steps = timeline(merge_xid_events(tuple(store.events)), store.rail.causes())
    assert [s.alarm for s in steps] == ["host_temp_critical"]
