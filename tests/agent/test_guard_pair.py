"""A GPU for which NVML offers no application-clock pair: step 1 says it could not cap its clocks (no write of
its own clocks called a cap), and the later steps still cap it; at start the guard says so beforehand."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rigmon.config import GuardSection
from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.agent.guard_helpers import Clock, Events, frame, settle, started

#: Application clocks, then a 200 W power limit.
CLOCKS_THEN_LIMIT = GuardSection(enabled=True, mode="enforce", rail_count=1, locked_clocks=False, power_limit_w=200.0,
                                 step_after_s=15.0, restore_after_s=30.0)
NO_PAIR = "GPU 1: application clocks not capped: NVML offers no application-clock pair for it"


def _no_clock_list(machine: FakeNvmlMachine) -> None:
    """GPU 1's driver lists no supported clocks (NOT_SUPPORTED, as for a board without application clocks)."""
    machine.fail("not_supported", gpu=1, symbols={"nvmlDeviceGetSupportedMemoryClocks"})


async def test_step_one_says_a_gpu_without_a_pair_is_not_capped_and_the_power_limit_still_caps_it(
        tmp_path: Path, machine: FakeNvmlMachine) -> None:
    """Before: step 1 wrote GPU 1's own clocks (877/1312), switched its persistence mode on and counted it capped."""
    events, clock = Events(), Clock()
    _no_clock_list(machine)
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, CLOCKS_THEN_LIMIT, events, clock)
        assert events.kinds() == ["guard_failed"]
        assert "GPU 1: step 1 cannot cap its application clocks: NVML offers no" in events.items[0][1]
        service.on_frame(frame(clock.t, 11.3, gpus=4))
        await settle(service)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005, 1312, 1005, 1005]
        assert [g.persistence_mode for g in machine.gpus] == [1, 0, 1, 1]
        (_, engaged, data), (_, failed, _) = events.items[1:]
        assert engaged.startswith("guard capped GPUs 0,2,3 (step 1, application clocks)")
        assert "gpu1" not in data["after"]
        assert NO_PAIR in failed
        assert 1 not in {s.index for s in service.reading().settings}
        clock.t += 16
        service.on_frame(frame(clock.t, 11.3, gpus=4))
        await settle(service)
        assert [g.power_limit_mw for g in machine.gpus] == [200_000] * 4
        assert events.kinds()[-1] == "guard_step" and "GPUs 0,1,2,3" in events.items[-1][1]
        clock.t += 31
        service.on_frame(frame(clock.t, 11.9, gpus=4))
        await settle(service)
        assert [(g.app_clock_graphics_mhz, g.power_limit_mw) for g in machine.gpus] == [(1312, 300_000)] * 4
        await asyncio.to_thread(service.close)


async def test_a_gpu_without_a_pair_that_comes_back_while_engaged_gets_the_later_steps(
        tmp_path: Path, machine: FakeNvmlMachine) -> None:
    """An extend takes the steps in force one after the other: the one it cannot take does not stop the rest."""
    events, clock = Events(), Clock()
    _no_clock_list(machine)
    with serving(tmp_path / "root", machine):
        machine.fail("gpu_lost", gpu=1)
        service = await started(tmp_path, CLOCKS_THEN_LIMIT, events, clock)
        for _ in range(2):
            service.on_frame(frame(clock.t, 11.3, gpus=4, lost=(1,)))
            await settle(service)
            clock.t += 16
        machine.heal("gpu_lost", gpu=1)
        service.on_frame(frame(clock.t, 11.9, gpus=4))
        await settle(service)
        assert [(g.app_clock_graphics_mhz, g.power_limit_mw) for g in machine.gpus] == [
            (1005, 200_000), (1312, 200_000), (1005, 200_000), (1005, 200_000)]
        (_, extended, data), (_, failed, _) = events.items[-2:]
        assert extended.startswith("guard capped GPUs 1 as the others (step 2, power limit)")
        assert data["after"] == "gpu1 877/1312 MHz 200 W" and NO_PAIR in failed
        await asyncio.to_thread(service.close)
        assert [(g.app_clock_graphics_mhz, g.power_limit_mw) for g in machine.gpus] == [(1312, 300_000)] * 4
