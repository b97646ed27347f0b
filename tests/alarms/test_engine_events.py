"""Rule engine, event rules and acknowledgement: Xid events per GPU (one report from NVML and the kernel log
counted once), the unclean shutdown alarm, acknowledged and new episodes."""

from __future__ import annotations

import pytest

from rigmon.agent.journal.runs import UncleanRun, unclean_message
from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.lifecycle import AlreadyResolved, UnknownAlarm
from rigmon.schema import Event
from tests.alarms.helpers import RAIL, T0, FakeClock, Step, default, event, gpu_states, restarted, rules, run


def test_xid_events_fire_per_gpu_latch_and_expire() -> None:
    steps = [
        Step(0, {}, [event("xid", "gpu:0", "Xid 13 on GPU 0", xid=13)]),
        Step(1, {}, [event("xid", "gpu:1", "Xid 79 on GPU 1: fallen off the bus", xid=79)]),
        Step(2, {}, [event("xid", "gpu:1", "Xid 79 again", xid=79), event("xid", "gpu:2", "x", xid=48)]),
        Step(3, {}),
        Step(3603, {}),
    ]
    engine, seen = run(default("gpu_xid_fatal"), steps)
    # The second Xid 79 on GPU 1 is the same alarm: counted (repeated), not fired again.
    assert seen == [(1, "firing", "gpu:1"), (2, "repeated", "gpu:1"), (2, "firing", "gpu:2"),
                    (3603, "resolved", "gpu:1"), (3603, "resolved", "gpu:2")]
    gpu1 = next(a for a in engine.recent() if a.subject == "gpu:1")
    assert gpu1.count == 2 and gpu1.value == 79 and gpu1.started_at == T0 + 1
    assert gpu1.message == "Xid 79 again (2 events since 2023-11-14 22:13:21 UTC)"


def xid(source: str, at_s: float, code: int = 79, gpu: int = 1, bus: str | None = "0000:3b:00.0") -> Event:
    """An Xid as the agent reports it from NVML's event set or from the kernel log."""
    text = {"nvml": f"Xid {code} on GPU {gpu}: GPU has fallen off the bus",
            "kmsg": f"Xid {code} on GPU {gpu} ({bus}): GPU has fallen off the bus."}[source]
    return Event(id=f"e-{source}-{at_s}", at=T0 + at_s, kind="xid", severity="critical", subject=f"gpu:{gpu}",
                 message=text, data={"source": source, "xid": code, "gpu_index": gpu, "pci_bus_id": bus})


@pytest.mark.parametrize(
    ("reports", "count"),
    [
        pytest.param([[xid("nvml", 0.2)], [xid("kmsg", 0.0)]], 1, id="nvml-then-kmsg"),
        pytest.param([[xid("kmsg", 0.0), xid("nvml", 0.3)]], 1, id="both-in-one-frame"),
        pytest.param([[xid("nvml", 0.0)], [xid("kmsg", 4.9)], [xid("nvml", 9.0)], [xid("kmsg", 9.5)]], 2,
                     id="two-xids-each-from-both"),
        pytest.param([[xid("nvml", 0.0)], [xid("nvml", 1.0)]], 2, id="same-source-twice-is-two"),
        pytest.param([[xid("nvml", 0.0)], [xid("kmsg", 5.5)]], 2, id="further-apart-than-the-merge-window"),
        pytest.param([[xid("nvml", 0.0, code=79)], [xid("kmsg", 0.5, code=48)]], 2, id="other-code"),
        pytest.param([[xid("nvml", 0.0, bus=None)], [xid("kmsg", 0.5, bus=None)]], 1, id="by-index-without-bus"),
    ],
)
def test_one_xid_reported_by_nvml_and_the_kernel_log_is_counted_once(reports: list[list[Event]],
                                                                      count: int) -> None:
    """The dashboard merges the two reports (rigmon.tui.event_merge); the alarm counts the Xid once and
    keeps the first report's text, the one its firing notification carried."""
    steps = [Step(i, {}, frame_events) for i, frame_events in enumerate(reports)]
    engine, seen = run(default("gpu_xid_fatal"), steps)
    # Fired once; each further Xid counted is a repeat of that alarm, not a second firing.
    assert seen[0] == (0, "firing", "gpu:1") and [change for _, change, _ in seen[1:]] == ["repeated"] * (count - 1)
    (alarm,) = engine.active()
    assert alarm.count == count
    if count == 1:
        assert alarm.message == reports[0][0].message


def test_another_gpus_report_is_its_own_alarm() -> None:
    steps = [Step(0, {}, [xid("nvml", 0.0, gpu=1, bus="0000:3b:00.0")]),
             Step(1, {}, [xid("kmsg", 0.1, gpu=2, bus="0000:5e:00.0")])]
    engine, seen = run(default("gpu_xid_fatal"), steps)
    assert seen == [(0, "firing", "gpu:1"), (1, "firing", "gpu:2")]
    assert [a.count for a in engine.active()] == [1, 1]


def test_the_unclean_shutdown_alarm_says_what_the_agent_found_once() -> None:
    """The agent's event already says "node restarted unexpectedly; last frame ...": the alarm
    (and every notification of it) must not say it twice."""
    crashed = UncleanRun(run_id="r0", node="n1", started_at=T0 - 600, last_frame_at=T0 - 2.1, final={})
    message, _ = unclean_message(crashed, T0)
    engine, _ = run(default("unclean_shutdown"), [Step(0, {}, [event("unclean_shutdown", "journal", message)])])
    (alarm,) = engine.active()
    assert alarm.message == message
    assert alarm.message.count("restarted unexpectedly") == 1


def test_a_second_unclean_shutdown_while_the_first_alarm_fires_is_counted_since_the_first() -> None:
    """The node crashes, restarts, crashes again within the alarm's latch: the restored alarm goes on (its
    start, its id) and says there were two since then, and the latest. It kept the first's "since" with
    the newest message alone, as if the second crash were the first and only one."""
    first, _ = unclean_message(UncleanRun("r0", "n1", T0 - 600, T0 - 2.0, {}), T0)
    second, _ = unclean_message(UncleanRun("r1", "n1", T0, T0 + 598.0, {}), T0 + 600)
    old = AlarmEngine(default("unclean_shutdown"), "n1", FakeClock(T0), id_prefix="r1")
    assert [t.change for t in old.evaluate_data({}, [event("unclean_shutdown", "node:n1", first)], T0)] == ["firing"]
    new = restarted(old, AlarmEngine(default("unclean_shutdown"), "n1", FakeClock(T0 + 600), id_prefix="r2"),
                    T0 + 600)
    new.evaluate_data({}, [event("unclean_shutdown", "node:n1", second)], T0 + 600)
    (alarm,) = new.active()
    assert alarm.id == "r1-a1" and alarm.started_at == T0 and alarm.count == 2
    assert alarm.message == f"{second} (2 events since 2023-11-14 22:13:20 UTC)"


def test_acknowledging_an_event_alarm_resolves_it_a_state_alarm_stays_firing() -> None:
    clock = FakeClock(T0)
    engine = AlarmEngine(default("unclean_shutdown", "gpu_lost"), "n1", clock, id_prefix="r")
    engine.evaluate_data(gpu_states("lost"), [event("unclean_shutdown", "node:n1",
                                                    "node restarted unexpectedly; rail 11.31 V 0.8 s before")], T0)
    by_rule = {a.rule: a for a in engine.active()}
    assert by_rule["unclean_shutdown"].message == "node restarted unexpectedly; rail 11.31 V 0.8 s before"
    clock.t = T0 + 5
    changes = engine.acknowledge(by_rule["unclean_shutdown"].id, "alice")
    assert [c.change for c in changes] == ["acknowledged", "resolved"]
    assert changes[-1].alarm.acknowledged_by == "alice" and changes[-1].alarm.acknowledged_at == T0 + 5
    changes = engine.acknowledge(by_rule["gpu_lost"].id, "bob")
    assert [c.change for c in changes] == ["acknowledged"]
    assert engine.active()[0].state == "firing" and engine.active()[0].acknowledged_by == "bob"
    assert engine.acknowledge(by_rule["gpu_lost"].id, "bob") == []  # idempotent
    with pytest.raises(AlreadyResolved):
        engine.acknowledge(by_rule["unclean_shutdown"].id, "alice")
    with pytest.raises(UnknownAlarm):
        engine.acknowledge("nope", "alice")


def test_a_new_episode_gets_a_new_id_and_no_acknowledgement() -> None:
    clock = FakeClock(T0)
    engine = AlarmEngine(rules(RAIL), "n1", clock, id_prefix="r")
    engine.evaluate_data({"psu_rail": {"volts": {"min_volts": 11.5}}}, [], T0)
    first = engine.active()[0]
    engine.acknowledge(first.id, "alice")
    engine.evaluate_data({"psu_rail": {"volts": {"min_volts": 12.0}}}, [], T0 + 1)
    engine.evaluate_data({"psu_rail": {"volts": {"min_volts": 11.5}}}, [], T0 + 2)
    second = engine.active()[0]
    assert second.id != first.id and second.acknowledged_at is None
    assert engine.recent()[0].id == first.id and engine.recent()[0].acknowledged_by == "alice"
