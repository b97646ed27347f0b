"""The undervolt guard while it cannot read what it watches (a stale or unplugged rail ADC, failing GPU
readings): the caps stay in force, said once, and come off only after the rail reads healthy again."""

from __future__ import annotations

import asyncio
from pathlib import Path

from msgspec.structs import replace

from rigmon.agent.guard.policy import GuardState, Observation, decide, observe
from rigmon.config import GuardSection
from rigmon.schema import CollectorStatus
from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.agent.guard_helpers import ENFORCE, Clock, Events, engaged, frame, settle

GPUS = (0, 1, 2, 3)
CFG = GuardSection(enabled=True, rail_count=1, restore_after_s=60.0)


def obs(at: float, volts: float | None = 11.9, unread: tuple[str, ...] = ()) -> Observation:
    return Observation(at=at, rail_min_volts=volts, gpus=GPUS, unread=unread)


def run(observations: list[Observation], state: GuardState | None = None):
    state = state or GuardState()
    out = []
    for o in observations:
        state, decisions = decide(state, o, CFG)
        out += [(o.at, d.kind, d.trigger, d.unread_since) for d in decisions]
    return state, out


def test_an_unread_rail_holds_the_caps_says_so_once_and_restores_after_reading_healthy_again() -> None:
    state, out = run([obs(0, 11.3), obs(10)] + [obs(t, None, ("rail",)) for t in range(11, 500, 10)])
    # Said when the restore would have been due (no trigger for restore_after_s), not at every blip.
    assert [(t, k) for t, k, _, _ in out] == [(0, "engage"), (61, "holding")]
    assert out[1][2].startswith("holding caps: rail not read since ") and out[1][3] == 10
    assert state.step == 1
    # Read again: healthy for restore_after_s from the first reading, not from the last trigger.
    state, out = run([obs(500), obs(559)], state)
    assert out == [] and state.step == 1
    state, out = run([obs(560)], state)
    assert [k for _, k, _, _ in out] == ["restore"] and state.step == 0


def test_silent_again_is_said_again_and_an_alarm_while_unread_still_steps() -> None:
    state, out = run([obs(0, 11.3), obs(1, None, ("rail",)), obs(61, None, ("rail",)), obs(62),
                      obs(63, None, ("rail",))])
    assert [(t, k) for t, k, _, _ in out] == [(0, "engage"), (61, "holding"), (63, "holding")]
    alarm = Observation(at=80, gpus=GPUS, alarms_fired=("psu_rail_low_critical",), unread=("rail",))
    state, out = run([alarm], state)
    assert [k for _, k, _, _ in out] == ["step"] and state.step == 2


def test_unread_gpu_readings_hold_when_throttle_reasons_trigger() -> None:
    rail_ok = frame(100.0, 11.9)
    failing = replace(rail_ok, collectors={"psu": CollectorStatus("ok", True), "gpu": CollectorStatus("hung", False)})
    assert observe(failing, GuardSection(throttle_gpus=2)).unread == ("GPU readings",)
    assert observe(failing, GuardSection(throttle_gpus=0)).unread == ()
    stale = replace(rail_ok, readings=replace(rail_ok.readings, psu_rail=replace(rail_ok.readings.psu_rail,
                                                                                  stale=True)))
    assert observe(stale, CFG).unread == ("rail",)
    gone = replace(rail_ok, readings=replace(rail_ok.readings, psu_rail=None),
                   collectors={"psu": CollectorStatus("error", False, "/dev/x: gone")})
    assert observe(gone, CFG).unread == ("rail",)
    no_adc = replace(gone, collectors={"psu": CollectorStatus("absent", True)})
    assert observe(no_adc, CFG).unread == ()  # a node without an ADC: nothing to wait for


async def test_the_service_holds_on_a_stale_rail_and_reports_it(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await engaged(tmp_path, ENFORCE, events, clock)
        read_at = clock.t
        for _ in range(10):
            clock.t += 10
            f = frame(clock.t, 11.9)
            service.on_frame(replace(f, readings=replace(f.readings, psu_rail=None),
                                     collectors={"psu": CollectorStatus("error", False, "/dev/x: gone")}))
            await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4
        assert events.kinds().count("guard_holding") == 1 and "guard_restored" not in events.kinds()
        reading = service.reading()
        assert (reading.state, reading.unread, reading.unread_since) == ("engaged", ("rail",), read_at)
        for _ in range(3):
            clock.t += 15
            service.on_frame(frame(clock.t, 11.9))
            await settle(service)
        assert events.kinds()[-1] == "guard_restored"
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        await asyncio.to_thread(service.close)
