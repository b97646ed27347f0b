"""A trigger alarm that keeps firing: the guard does not restore under it (pure policy, the service
over the fake NVML, and a real agent whose alarm judge runs before the guard); one that ends without
an ``alarm_resolved`` event (its engine replaced) holds no longer than ``restore_after_s``; one carried over a restart holds until
fresh readings decide it."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import msgspec

from rigmon.agent.agent import Agent
from rigmon.agent.alarm_state import STATE_FILE_NAME, read_state_file
from rigmon.agent.guard.policy import GuardState, Observation, decide, observe, release
from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.rules import parse_rules
from rigmon.config import AgentConfig, AgentSection, GuardSection
from rigmon.schema import Alarm, CollectorStatus, Event, TemperatureReading
from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.agent.guard_helpers import (
    ENFORCE,
    RULE,
    Clock,
    Events,
    alarm_event,
    firing_alarm,
    frame,
    settle,
    started,
)
from tests.agent.test_alarm_state import events as events_of
from tests.agent.test_alarm_state import settle as settle_agent
from tests.agent.test_alarms import Probe, wait_for
from tests.alarms.helpers import T0, FakeClock

GPUS = (0, 1, 2, 3)
CFG = GuardSection(enabled=True, rail_count=1, step_after_s=10.0, restore_after_s=60.0)


def _obs(at: float, *events: Event, active: tuple[Alarm, ...] = ()) -> Observation:
    """A healthy rail (a new window each frame), ``events`` and the alarms in force, as `observe` reads them."""
    o = observe(msgspec.structs.replace(frame(at, 11.9, gpus=4), events=events), CFG, active)
    assert o.gpus == GPUS and o.rail_min_volts == 11.9
    return o


def _run(observations: list[Observation], state: GuardState | None = None) -> tuple[GuardState, list[tuple]]:
    state = state or GuardState()
    out: list[tuple] = []
    for o in observations:
        state, decisions = decide(state, o, CFG)
        out += [(o.at, d.kind, d.step) for d in decisions]
    return state, out


def test_no_restore_while_a_trigger_alarm_keeps_firing() -> None:
    # The rail alarm fires once (one event), then keeps firing for 200 s with the rail read healthy.
    on = (firing_alarm(),)
    state, out = _run([_obs(0, alarm_event("alarm_firing"), active=on)]
                      + [_obs(t, active=on) for t in range(10, 210, 10)])
    assert out == [(0, "engage", 1)]  # no restore under the firing alarm, and no further step
    assert state.step == 1 and state.alarms_firing == ("a1",)
    # It resolves at 210: the restore comes restore_after_s later, not at once.
    state, out = _run([_obs(210, alarm_event("alarm_resolved"))] + [_obs(t) for t in range(220, 290, 10)], state)
    assert out == [(270, "restore", 0)]
    assert state.alarms_firing == ()


def test_an_alarm_still_firing_after_a_restart_holds_but_does_not_engage() -> None:
    restored, on = alarm_event("alarm_firing", restored=True), (firing_alarm(),)
    state, out = _run([_obs(0, restored, active=on)] + [_obs(t, active=on) for t in range(10, 100, 10)])
    assert out == [] and state.step == 0 and state.alarms_firing == ("a1",)
    # A sag engages; the restore waits for the alarm carried over from before the restart.
    sag = dataclasses.replace(_obs(100, active=on), rail_min_volts=11.3)
    state, out = _run([sag] + [_obs(t, active=on) for t in range(110, 300, 10)], state)
    assert out == [(100, "engage", 1)]
    state, out = _run([_obs(300, alarm_event("alarm_resolved"))] + [_obs(t) for t in range(310, 370, 10)], state)
    assert out == [(360, "restore", 0)]


def test_other_alarms_and_an_operator_release_keep_the_firing_set() -> None:
    other = Event("e", 0.0, "alarm_resolved", "warning", "psu", "x", {"rule": "psu_rail_low_warning", "alarm_id": "a2"})
    on = (firing_alarm(), firing_alarm("a2", "psu_rail_low_warning"))
    state, _ = _run([_obs(0, alarm_event("alarm_firing"), active=on), _obs(10, other, alarm_event("alarm_acknowledged"),
                                                                       active=on[:1])])
    assert state.alarms_firing == ("a1",)
    state, decisions = release(state, 20.0, "released by alice", quiet_s=60.0)
    assert [d.kind for d in decisions] == ["restore"] and state.alarms_firing == ("a1",)


async def test_service_keeps_caps_while_the_rail_alarm_fires(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    config = msgspec.structs.replace(ENFORCE, alarm_rules=(RULE,))
    active: list[Alarm] = [firing_alarm()]
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, config, events, clock)
        service.active_alarms = lambda: active
        service.on_frame(msgspec.structs.replace(frame(clock.t, 11.9), events=(alarm_event("alarm_firing"),)))
        await settle(service)
        assert events.kinds()[-1] == "guard_engaged" and "alarm psu_rail_low_critical firing" in str(
            events.items[-1][2]["trigger"])
        for _ in range(12):  # 120 s, four times restore_after_s, with the rail read healthy
            clock.t += 10
            service.on_frame(frame(clock.t, 11.9))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4
        assert service.reading().state == "engaged" and "guard_restored" not in events.kinds()
        clock.t += 10
        active.clear()
        service.on_frame(msgspec.structs.replace(frame(clock.t, 11.9), events=(alarm_event("alarm_resolved"),)))
        for _ in range(3):
            clock.t += 10
            service.on_frame(frame(clock.t, 11.9))
        await settle(service)
        assert events.kinds()[-1] == "guard_restored"
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        await asyncio.to_thread(service.close)


async def test_the_guard_sees_the_alarm_that_fired_in_the_same_frame(tmp_path: Path) -> None:
    """The alarms judge a frame before the guard: the guard judges it with their transitions.

    They were added to the frame only after every judge had run, so the guard never saw an alarm
    fire and ``alarm_rules`` engaged nothing.
    """
    rules = parse_rules('[[rule]]\nname = "hot"\nkind = "threshold"\nseverity = "critical"\n'
                        'select = "temperatures[sensor=probe].temp_c"\nabove = 90.0\nsubject = "probe"\n'
                        'message = "probe at {value} C"\n', "test")
    probe = Probe()
    config = AgentConfig(agent=AgentSection(node="t", root=str(tmp_path), interval_s=30.0),
                         guard=GuardSection(enabled=True, alarm_rules=("hot",), throttle_gpus=0))
    agent = Agent(config, token="read", collectors={"probe": probe}, rules=rules)
    agent.start()
    try:
        for _ in range(1000):
            if probe.push is not None and agent.buffer is not None and agent.buffer.latest is not None:
                break
            await asyncio.sleep(0.01)
        assert agent.guard is not None and probe.push is not None
        probe.push([TemperatureReading(sensor="probe", label="probe", temp_c=95.0)])
        for _ in range(1000):
            if agent.alarms.engine.active() and agent.guard.reading().step:
                break
            await asyncio.sleep(0.01)
        assert agent.alarms.engine.active()
        reading = agent.guard.reading()
        assert (reading.state, reading.step) == ("engaged", 1) and reading.trigger == "alarm hot firing"
    finally:
        await agent.stop()


def test_a_sag_whose_frame_lists_no_gpu_caps_the_gpus_seen_before() -> None:
    """NVML failing in the brown-out (the GPU collector's error clears its readings): the sag's frame
    lists no GPU. The engage capped none of them (``gpus: ""``) and used up an action."""
    seen = observe(frame(0, 11.9, gpus=4), CFG)
    failed = frame(1, 11.3, gpus=0)
    failed = msgspec.structs.replace(failed, collectors={**failed.collectors, "gpu": CollectorStatus(
        "error", False, error="NVML: GPU is lost")})
    sag = observe(failed, CFG)
    assert sag.gpus == () and sag.rail_min_volts == 11.3
    _, decisions = decide(decide(GuardState(), seen, CFG)[0], sag, CFG)
    assert [(d.kind, d.gpus) for d in decisions] == [("engage", GPUS)]
    # The configured GPUs are kept to those seen present.
    config = msgspec.structs.replace(CFG, gpus=(1, 5))
    _, decisions = decide(decide(GuardState(), seen, config)[0], sag, config)
    assert [(d.kind, d.gpus) for d in decisions] == [("engage", (1,))]


def test_blind_under_a_firing_alarm_still_says_it_holds() -> None:
    """The ADC falls silent while its rail alarm fires: the caps stay, and ``guard_holding`` says why."""
    state, _ = _run([_obs(0, alarm_event("alarm_firing"), active=(firing_alarm(),))])
    blind = [dataclasses.replace(_obs(t, active=(firing_alarm(),)), rail_min_volts=None, rail_window=None,
                                 unread=("rail",))
             for t in range(10, 200, 10)]
    state, out = _run(blind, state)
    assert out == [(60, "holding", 1)] and state.step == 1


def test_an_alarm_that_ends_without_a_resolved_event_holds_only_restore_after_s() -> None:
    """Whether a trigger alarm fires is what the engine has in force: one gone without an ``alarm_resolved``
    (its rule removed) no longer holds the caps, but the restore still waits ``restore_after_s`` from the
    last frame it was in force."""
    on = (firing_alarm(),)
    state, out = _run([_obs(0, alarm_event("alarm_firing"), active=on)]
                      + [_obs(t, active=on) for t in range(10, 110, 10)])
    assert out == [(0, "engage", 1)]
    state, out = _run([_obs(t) for t in range(110, 220, 10)], state)  # gone at 110, no event
    assert out == [(170, "restore", 0)] and state.alarms_firing == ()


async def test_an_alarm_engine_restarted_without_the_trigger_rule_does_not_hold_the_caps_for_ever(
        tmp_path: Path) -> None:
    """A real agent whose alarm engine is replaced by one without the trigger rule (a configuration
    reloaded): the firing alarm ends without an ``alarm_resolved`` event. The guard held its caps for
    ever; now it restores ``restore_after_s`` after the last frame the alarm was in force, not at once."""
    rules = parse_rules('[[rule]]\nname = "hot"\nkind = "threshold"\nseverity = "critical"\n'
                        'select = "temperatures[sensor=probe].temp_c"\nabove = 90.0\nsubject = "probe"\n', "test")
    clock, probe = FakeClock(T0), Probe()
    config = AgentConfig(agent=AgentSection(node="t", root=str(tmp_path), interval_s=30.0),
                         guard=GuardSection(enabled=True, alarm_rules=("hot",), throttle_gpus=0, restore_after_s=60.0))
    agent = Agent(config, token="read", collectors={"probe": probe}, rules=rules, clock=clock)
    agent.start()
    try:
        await wait_for(lambda: probe.push is not None and agent.buffer is not None
                       and agent.buffer.latest is not None)
        assert agent.guard is not None
        await settle_agent(agent, clock, 1.0, probe, probe=95.0)
        assert agent.guard.reading().state == "engaged" and agent.guard.reading().trigger == "alarm hot firing"
        await settle_agent(agent, clock, 100.0, probe, probe=95.0)
        assert agent.guard.reading().state == "engaged"  # the alarm fires: no restore
        agent.alarms.engine = AlarmEngine((), "t", clock, id_prefix="reloaded")
        for t in (101.0, 160.0):  # not at once: 60 s from the frame in which it was gone
            await settle_agent(agent, clock, t, probe, probe=95.0)
            assert agent.guard.reading().state == "engaged"
        assert not any(e.kind == "alarm_resolved" for e in events_of(agent))
        await settle_agent(agent, clock, 161.0, probe, probe=95.0)
        assert agent.guard.reading().state == "armed"
    finally:
        await agent.stop()


async def test_an_alarm_carried_over_a_restart_holds_until_fresh_readings_decide_it(tmp_path: Path) -> None:
    """Killed while the trigger alarm fired: the next run carries it (listed as firing in ``/v1/alarms``)
    until fresh readings decide it. The guard counted it firing only once they confirmed it."""
    rules = parse_rules('[[rule]]\nname = "hot"\nkind = "threshold"\nseverity = "critical"\n'
                        'select = "temperatures[sensor=probe].temp_c"\nabove = 90.0\nsubject = "probe"\n', "test")
    config = AgentConfig(agent=AgentSection(node="t", root=str(tmp_path), interval_s=30.0, state_dir=str(tmp_path)),
                         guard=GuardSection(enabled=True, alarm_rules=("hot",), throttle_gpus=0))
    clock, probe = FakeClock(T0), Probe()
    first = Agent(config, token="read", collectors={"probe": probe}, rules=rules, clock=clock)
    first.start()
    await wait_for(lambda: probe.push is not None)
    await settle_agent(first, clock, 1.0, probe, probe=95.0)
    (hot,) = first.alarms.engine.active()
    path = tmp_path / STATE_FILE_NAME
    await wait_for(lambda: path.exists() and (saved := read_state_file(path)) is not None
                   and len(saved.engine.alarms) == 1)
    crashed = path.read_bytes()  # what kill -9 leaves
    await first.stop()
    path.write_bytes(crashed)
    probe = Probe()
    second = Agent(config, token="read", collectors={"probe": probe}, rules=rules, clock=clock)
    second.start()
    try:
        await wait_for(lambda: probe.push is not None)
        assert second.guard is not None
        await settle_agent(second, clock, 10.0, probe, other=40.0)  # the alarm's subject not read yet
        assert [a.id for a in second.alarms.engine.book.carried()] == [hot.id]
        # The engine says which alarms are in force (active and carried); the guard asks it that.
        assert [a.id for a in second.alarms.engine.in_force()] == [hot.id] and not second.alarms.engine.active()
        assert second.guard.active_alarms is not None and [a.id for a in second.guard.active_alarms()] == [hot.id]
        assert second.guard.shared.state.alarms_firing == (hot.id,)
        await settle_agent(second, clock, 11.0, probe, probe=80.0)  # decided: clear
        assert second.guard.shared.state.alarms_firing == ()
    finally:
        await second.stop()
