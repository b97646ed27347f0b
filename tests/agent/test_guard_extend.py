"""GPUs that (re)appear while the guard is engaged get the caps in force (``extend``): one lost at the
sag, one reset back onto the bus, those first read after a sag; pure policy and the service over the
fake NVML."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rigmon.agent.guard.policy import GuardState, Observation, decide
from rigmon.agent.guard.state_file import read_state, state_file_path
from rigmon.config import GuardSection
from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.agent.guard_helpers import Clock, Events, frame, settle, started

CFG = GuardSection(enabled=True, rail_count=1, step_after_s=10.0, restore_after_s=60.0)
#: Every GPU the tests' configurations may cap, with its steps (the default: three of them).
ENFORCE_ALL = GuardSection(enabled=True, mode="enforce", rail_count=1, restore_after_s=30.0)


def _run(observations: list[Observation], config: GuardSection = CFG,
         state: GuardState | None = None) -> tuple[GuardState, list[tuple[float, str, int, tuple[int, ...]]]]:
    state = state or GuardState()
    out: list[tuple[float, str, int, tuple[int, ...]]] = []
    for o in observations:
        state, decisions = decide(state, o, config)
        out += [(o.at, d.kind, d.step, d.gpus) for d in decisions]
    return state, out


def test_a_gpu_that_appears_while_engaged_gets_the_steps_in_force_before_the_next() -> None:
    sag = Observation(at=0, rail_min_volts=11.3, rail_window=0, gpus=(0, 1, 2))  # GPU 3 lost at the sag
    state, out = _run([sag, Observation(at=10, rail_min_volts=11.3, rail_window=10, gpus=(0, 1, 2))])
    assert out == [(0, "engage", 1, (0, 1, 2)), (10, "step", 2, (0, 1, 2))]
    # Back with the next sag: it gets steps 1 and 2 first, then step 3 with the others.
    state, out = _run([Observation(at=20, rail_min_volts=11.3, rail_window=20, gpus=(0, 1, 2, 3))], state=state)
    assert out == [(20, "extend", 2, (3,)), (20, "step", 3, (0, 1, 2, 3))]
    assert state.gpus == (0, 1, 2, 3)
    # Listed again: nothing more. Off the bus and back (a reset gives it its own settings): again.
    state, out = _run([Observation(at=t, rail_min_volts=11.9, rail_window=t, gpus=g)
                       for t, g in ((21, (0, 1, 2, 3)), (22, (0, 1, 2)), (23, (0, 1, 2)), (24, (0, 1, 2, 3)))],
                      state=state)
    assert out == [(24, "extend", 3, (3,))]
    # A frame whose GPU collector failed lists none: that is no GPU coming back.
    state, out = _run([Observation(at=25, rail_min_volts=11.9, rail_window=25),
                       Observation(at=26, rail_min_volts=11.9, rail_window=26, gpus=(0, 1, 2, 3))], state=state)
    assert out == []


def test_no_extend_while_armed_nor_in_the_frame_that_restores_nor_beyond_the_configured_gpus() -> None:
    state, out = _run([Observation(at=0, rail_min_volts=11.9, rail_window=0, gpus=(0, 1)),
                       Observation(at=1, rail_min_volts=11.9, rail_window=1, gpus=(0, 1, 2))])
    assert out == []  # armed: nothing to extend
    state, out = _run([Observation(at=2, rail_min_volts=11.3, rail_window=2, gpus=(0, 1))], state=state)
    assert out == [(2, "engage", 1, (0, 1))]
    state, out = _run([Observation(at=62, rail_min_volts=11.9, rail_window=62, gpus=(0, 1, 2))], state=state)
    assert out == [(62, "restore", 0, (0, 1, 2))]  # healthy long enough: restored, not capped first
    config = GuardSection(enabled=True, rail_count=1, gpus=(1, 2))
    state, out = _run([Observation(at=0, rail_min_volts=11.3, rail_window=0, gpus=(0, 1)),
                       Observation(at=1, rail_min_volts=11.9, rail_window=1, gpus=(0, 1, 2, 3))], config)
    assert out == [(0, "engage", 1, (1,)), (1, "extend", 1, (2,))]


def test_gpus_configured_and_not_yet_read_at_the_sag_are_not_capped_twice() -> None:
    config = GuardSection(enabled=True, rail_count=1, gpus=(0, 1))
    state, out = _run([Observation(at=0, rail_min_volts=11.3, rail_window=0),
                       Observation(at=1, rail_min_volts=11.9, rail_window=1, gpus=(0, 1))], config)
    assert out == [(0, "engage", 1, (0, 1))]


async def test_a_gpu_lost_at_the_sag_is_capped_when_it_comes_back_and_restored_with_the_others(
        tmp_path: Path, machine: FakeNvmlMachine) -> None:
    """GPU 3 is off the bus in the sag's frames: the engage and the step cap GPUs 0-2. Reset back onto the
    bus while the guard is engaged, it ran uncapped; now it gets both steps, its original settings on disk
    first, and goes back with the others."""
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, restore_after_s=30.0)
    with serving(tmp_path / "root", machine):
        machine.fail("gpu_lost", gpu=3)
        service = await started(tmp_path, config, events, clock)
        service.on_frame(frame(clock.t, 11.3, gpus=4, lost=(3,)))
        clock.t += 16
        service.on_frame(frame(clock.t, 11.3, gpus=4, lost=(3,)))
        await settle(service)
        assert [(g.app_clock_graphics_mhz, g.locked_clock_max_mhz) for g in machine.gpus] == [(1005, 1005)] * 3 + [
            (1312, None)]
        machine.heal("gpu_lost", gpu=3)
        clock.t += 1
        service.on_frame(frame(clock.t, 11.9, gpus=4))
        await settle(service)
        assert (machine.gpus[3].app_clock_graphics_mhz, machine.gpus[3].locked_clock_max_mhz) == (1005, 1005)
        kind, message, data = events.items[-1]
        assert kind == "guard_extended" and (data["gpus"], data["step"], data["step_name"]) == ("3", 2, "locked_clocks")
        assert message.startswith("guard capped GPUs 3 as the others (step 2, application clocks, locked clocks)")
        saved = read_state(state_file_path(tmp_path / "state"))
        assert [(o.index, o.app_clock_graphics_mhz) for o in saved.original][-1] == (3, 1312)
        assert service.reading().gpus == (0, 1, 2, 3) and len(service.reading().settings) == 4
        clock.t += 31
        service.on_frame(frame(clock.t, 11.9, gpus=4))
        await settle(service)
        assert events.kinds()[-1] == "guard_restored" and "GPUs 0,1,2,3 " in events.items[-1][1]
        assert [(g.app_clock_graphics_mhz, g.locked_clock_max_mhz) for g in machine.gpus] == [(1312, None)] * 4
        assert not state_file_path(tmp_path / "state").exists()
        await asyncio.to_thread(service.close)


async def test_a_capped_gpu_reset_back_onto_the_bus_is_capped_again(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    """A GPU capped, lost and reset (``nvidia-smi -r``) runs with its own clocks: it gets the caps again."""
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, ENFORCE_ALL, events, clock)
        service.on_frame(frame(clock.t, 11.3, gpus=4))
        await settle(service)
        machine.fail("gpu_lost", gpu=2)
        clock.t += 1
        service.on_frame(frame(clock.t, 11.9, gpus=4, lost=(2,)))
        machine.heal("gpu_lost", gpu=2)  # the reset puts the board's own clocks back (the sim does, as NVML)
        assert machine.gpus[2].app_clock_graphics_mhz == 1312
        clock.t += 1
        service.on_frame(frame(clock.t, 11.9, gpus=4))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4
        assert events.kinds()[-1] == "guard_extended"
        await asyncio.to_thread(service.close)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4


async def test_a_sag_before_the_first_gpu_reading_caps_the_gpus_once_they_are_read(
        tmp_path: Path, machine: FakeNvmlMachine) -> None:
    """The rail sags before the GPU collector first answered (no ``gpus`` configured): the engage had no
    GPU to cap and none was ever capped. Now the GPUs read while the guard is engaged get the caps."""
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, ENFORCE_ALL, events, clock)
        service.on_frame(frame(clock.t, 11.3, gpus=0))
        await settle(service)
        assert events.kinds() == ["guard_failed"] and "no GPU to act on" in events.items[-1][1]
        clock.t += 1
        service.on_frame(frame(clock.t, 11.9, gpus=4))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4
        assert events.kinds()[-1] == "guard_extended" and service.reading().gpus == (0, 1, 2, 3)
        clock.t += 31
        service.on_frame(frame(clock.t, 11.9, gpus=4))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
        assert events.kinds()[-1] == "guard_restored" and not state_file_path(tmp_path / "state").exists()
        await asyncio.to_thread(service.close)
