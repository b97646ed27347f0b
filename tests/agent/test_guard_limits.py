"""The guard's power-limit step within what the GPU allows (NVML's power-limit constraints), and the
application-clock pair of a GPU NVML could not read at the start."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rigmon.config import GuardSection
from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.agent.guard_helpers import Clock, Events, engaged_by_sags, frame, settle, started


def limit_step(power_limit_w: float) -> GuardSection:
    """Application clocks, then ``power_limit_w`` at the next sag."""
    return GuardSection(enabled=True, mode="enforce", rail_count=1, restore_after_s=30.0, step_after_s=0.0,
                        locked_clocks=False, power_limit_w=power_limit_w, gpus=(0, 1, 2, 3))


async def test_a_limit_below_the_gpus_minimum_caps_at_the_minimum(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    """A V100-SXM2 takes 150..300 W: 100 W configured caps at 150 W (said at start), not at nothing."""
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await engaged_by_sags(tmp_path, limit_step(100.0), events, clock, sags=2)
        assert [g.power_limit_mw for g in machine.gpus] == [150_000] * 4
        assert events.kinds() == ["guard_failed", "guard_engaged", "guard_step"]
        assert "power_limit_w 100 is below its minimum 150 W: the step sets 150 W" in events.items[0][1]
        assert "gpu0 877/1005 MHz 150 W" in events.items[-1][1]
        assert [s.power_limit_w for s in service.reading().settings] == [150.0] * 4
        clock.t += 31
        service.on_frame(frame(clock.t, 11.9))
        await settle(service)
        assert [g.power_limit_mw for g in machine.gpus] == [300_000] * 4
        await asyncio.to_thread(service.close)


async def test_a_gpu_at_its_minimum_already_is_not_written(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    machine.gpus[2].power_limit_mw = 150_000
    with serving(tmp_path / "root", machine):
        service = await engaged_by_sags(tmp_path, limit_step(100.0), events, clock, sags=2)
        assert [g.power_limit_mw for g in machine.gpus] == [150_000] * 4
        clock.t += 31
        service.on_frame(frame(clock.t, 11.9))
        await settle(service)
        assert [g.power_limit_mw for g in machine.gpus] == [300_000, 300_000, 150_000, 300_000]
        await asyncio.to_thread(service.close)


async def test_a_gpu_off_the_bus_when_the_guard_started_gets_its_derived_clocks(tmp_path: Path,
                                                                              machine: FakeNvmlMachine) -> None:
    """The pair is derived at the start (so engaging costs only the writes); a GPU that could not be read
    then had no pair for the rest of the run: its step 1 wrote its own clocks back and called it capped."""
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        machine.fail("gpu_lost", gpu=1)
        service = await started(tmp_path, GuardSection(enabled=True, mode="enforce", rail_count=1), events, clock)
        machine.heal("gpu_lost", gpu=1)
        service.on_frame(frame(clock.t, 11.3, gpus=4))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4
        await asyncio.to_thread(service.close)
