"""A capped GPU that goes off the bus and is reset comes back with the board's defaults: the guard caps it
again with one ``guard_extended`` (no "changed elsewhere"), and a GPU that keeps coming back is capped
again at most ``max_actions_per_hour`` times an hour; pure policy and the service over the fake NVML."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rigmon.agent.guard.policy import GuardState, Observation, decide
from rigmon.config import GuardSection
from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.agent.guard_helpers import Clock, Events, gpu_frame, settle, started

#: Three steps (application clocks, locked clocks, 200 W), each sag 16 s after the last takes the next.
THREE_STEPS = GuardSection(enabled=True, mode="enforce", rail_count=1, restore_after_s=30.0)


def _capped(machine: FakeNvmlMachine) -> list[tuple[int, int | None, int]]:
    return [(g.app_clock_graphics_mhz, g.locked_clock_max_mhz, g.power_limit_mw) for g in machine.gpus]


async def test_a_capped_gpu_reset_back_onto_the_bus_is_capped_again_with_one_event(
        tmp_path: Path, machine: FakeNvmlMachine) -> None:
    """GPU 2 at step 3 falls off the bus and is reset: its first frame back shows the board's defaults. That is
    no change made elsewhere (before: a ``guard_failed`` with ``changed_elsewhere`` took them for the
    operator's, and the restore would have left them); the guard caps it again, saying once what it ran with."""
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, THREE_STEPS, events, clock)
        for _ in range(3):
            service.on_frame(gpu_frame(clock.t, machine, volts=11.3))
            await settle(service)
            clock.t += 16
        assert _capped(machine) == [(1005, 1005, 200_000)] * 4
        assert events.kinds() == ["guard_engaged", "guard_step", "guard_step"]
        machine.fail("gpu_lost", gpu=2)
        service.on_frame(gpu_frame(clock.t, machine))
        await settle(service)
        machine.heal("gpu_lost", gpu=2)
        clock.t += 1
        service.on_frame(gpu_frame(clock.t, machine))  # the board's defaults: 1312 MHz, no lock, 300 W
        await settle(service)
        clock.t += 1
        service.on_frame(gpu_frame(clock.t, machine))  # capped again: as the guard set it
        await settle(service)
        assert _capped(machine) == [(1005, 1005, 200_000)] * 4
        assert events.kinds() == ["guard_engaged", "guard_step", "guard_step", "guard_extended"]
        _, message, data = events.items[-1]
        assert (data["gpus"], data["step"], data["before"]) == ("2", 3, "gpu2 877/1312 MHz 300 W")
        assert data["after"] == "gpu2 877/1005 MHz lock<=1005 200 W" and "GPUs 2 as the others" in message
        reading = service.reading()
        assert reading.settings[2].app_clock_graphics_mhz == 1005 and reading.original[2].power_limit_w == 300.0
        clock.t += 31
        service.on_frame(gpu_frame(clock.t, machine))
        await settle(service)
        assert events.kinds()[-1] == "guard_restored" and "left as set elsewhere" not in events.items[-1][1]
        assert _capped(machine) == [(1312, None, 300_000)] * 4
        assert [g.persistence_mode for g in machine.gpus] == [0] * 4
        await asyncio.to_thread(service.close)


def test_a_gpu_flapping_on_and_off_the_bus_is_capped_again_each_time_with_events_up_to_the_ceiling() -> None:
    """Off the bus and back every other second: capped again every time (uncapped, it would draw more from
    the rail that may be throwing it off), its events limited to ``max_actions_per_hour`` an hour, the last
    saying so (``extend_limited``); the others' steps and their own ceiling are untouched, and the hour
    over, its returns are told again."""
    config = GuardSection(enabled=True, rail_count=1, step_after_s=10.0, restore_after_s=7200.0,
                          max_actions_per_hour=3)
    state, decisions = decide(GuardState(), Observation(at=0, rail_min_volts=11.3, rail_window=0, gpus=(0, 1)),
                              config)
    assert [(d.kind, d.gpus) for d in decisions] == [("engage", (0, 1))]
    out: list[tuple[float, str, tuple[int, ...], bool]] = []
    for k in range(1, 41):
        obs = Observation(at=k, rail_min_volts=11.9 if k != 20 else 11.3, rail_window=k,
                          gpus=(0, 1) if k % 2 == 0 else (0,))
        state, decisions = decide(state, obs, config)
        out += [(obs.at, d.kind, d.gpus, d.quiet) for d in decisions]
    told = [(2, "extend", (1,), False), (4, "extend", (1,), False), (6, "extend_limited", (1,), False)]
    quiet = [(k, "extend", (1,), True) for k in range(8, 41, 2)]
    assert out == sorted([*told, *quiet, (20, "step", (0, 1), False)], key=lambda o: (o[0], o[1] == "step"))
    assert state.step == 2 and state.gpus == (0, 1)
    state, decisions = decide(state, Observation(at=3700, rail_min_volts=11.9, rail_window=3700, gpus=(0,)),
                              config)
    state, decisions = decide(state, Observation(at=3701, rail_min_volts=11.9, rail_window=3701, gpus=(0, 1)),
                              config)
    assert [(d.kind, d.step, d.gpus, d.quiet) for d in decisions] == [("extend", 2, (1,), False)]


async def test_a_gpu_over_its_ceiling_is_capped_again_without_events_or_changed_elsewhere_reports(
        tmp_path: Path, machine: FakeNvmlMachine) -> None:
    """GPU 1 keeps being reset while the guard is engaged (ceiling 1 an hour): capped again every time, its
    first return told (saying further ones are not), the others silent; no change made elsewhere is
    reported, and the restore puts every GPU back."""
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, locked_clocks=False, power_limit_w=0,
                          restore_after_s=30.0, max_actions_per_hour=1)
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, config, events, clock)
        service.on_frame(gpu_frame(clock.t, machine, volts=11.3))
        await settle(service)
        for _ in range(4):
            machine.fail("gpu_lost", gpu=1)
            clock.t += 1
            service.on_frame(gpu_frame(clock.t, machine))
            machine.heal("gpu_lost", gpu=1)
            for _ in range(2):
                clock.t += 1
                service.on_frame(gpu_frame(clock.t, machine))
                await settle(service)
            assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4  # capped again each time
        assert events.kinds() == ["guard_engaged", "guard_extended"]
        assert "further returns within the hour are capped without an event" in events.items[-1][1]
        clock.t += 31
        service.on_frame(gpu_frame(clock.t, machine))
        await settle(service)
        assert events.kinds()[-1] == "guard_restored" and "left as set elsewhere" not in events.items[-1][1]
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        await asyncio.to_thread(service.close)
