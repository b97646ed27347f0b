"""The guard's events name in ``data.gpus`` the GPUs their message names: those an engage, step or restore
changed (the others in ``gpus_skipped``, with why), those a failure concerns; and ``actions_last_hour``
counts every action taken on the GPUs, re-caps and restores included."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from msgspec.structs import replace

from rigmon.agent.guard.service import GuardService
from rigmon.config import GuardSection
from rigmon.schema import CollectorStatus
from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.agent.guard_helpers import Clock, Events, frame, settle, started

#: Application clocks only: one step, then the restore.
CLOCKS_ONLY = GuardSection(enabled=True, mode="enforce", rail_count=1, locked_clocks=False, power_limit_w=0.0,
                           restore_after_s=30.0)
NO_PAIR = "GPU 1: application clocks not capped: NVML offers no application-clock pair for it"


@contextlib.asynccontextmanager
async def engaged_with_gpu_1_unpaired(tmp_path: Path, machine: FakeNvmlMachine, events: Events,
                                      clock: Clock) -> AsyncIterator[GuardService]:
    """The guard engaged by a 11.3 V rail on four GPUs, GPU 1 without an application-clock pair; closed after."""
    machine.fail("not_supported", gpu=1, symbols={"nvmlDeviceGetSupportedMemoryClocks"})
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, CLOCKS_ONLY, events, clock)
        service.on_frame(frame(clock.t, 11.3, gpus=4))
        await settle(service)
        try:
            yield service
        finally:
            await asyncio.to_thread(service.close)


async def test_an_engage_names_the_gpus_it_capped_and_those_it_skipped_and_the_restore_those_it_restored(
        tmp_path: Path, machine: FakeNvmlMachine) -> None:
    """Before: ``guard_engaged`` and ``guard_restored`` said ``gpus: "0,1,2,3"`` of GPUs 0, 2 and 3 capped and
    restored (GPU 1 has no application-clock pair), and ``guard_failed`` of GPU 1 alone said the same."""
    events, clock = Events(), Clock()
    async with engaged_with_gpu_1_unpaired(tmp_path, machine, events, clock) as service:
        (_, engaged, data), (kind, failed, failed_data) = events.items[1:]
        assert engaged.startswith("guard capped GPUs 0,2,3 (step 1")
        assert (data["gpus"], failed_data["gpus"]) == ("0,2,3", "1")
        assert data["gpus_skipped"] == "1" and str(data["skipped"]).startswith(NO_PAIR)
        assert kind == "guard_failed" and NO_PAIR in failed
        clock.t += 31
        service.on_frame(frame(clock.t, 11.9, gpus=4))
        await settle(service)
        kind, restored, data = events.items[-1]
        assert kind == "guard_restored" and restored.startswith("guard restored GPUs 0,2,3 (")
        assert data["gpus"] == "0,2,3"


async def test_an_engage_that_capped_every_gpu_skips_none(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, CLOCKS_ONLY, events, clock)
        service.on_frame(frame(clock.t, 11.3, gpus=4))
        await settle(service)
        assert events.kinds() == ["guard_engaged"]
        data = events.items[0][2]
        assert (data["gpus"], data["gpus_skipped"], data["skipped"]) == ("0,1,2,3", "", None)
        await asyncio.to_thread(service.close)


async def test_actions_last_hour_counts_re_caps_and_restores(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    """Before: an engage, GPU 2 reset back onto the bus and capped again, and the restore counted 1 action
    (the engage alone); now 3: each re-capped GPU and each restore is an action on the GPUs."""
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await started(tmp_path, CLOCKS_ONLY, events, clock)
        assert service.reading().actions_last_hour == 0
        service.on_frame(frame(clock.t, 11.3, gpus=4))
        await settle(service)
        assert service.reading().actions_last_hour == 1
        machine.fail("gpu_lost", gpu=2)
        clock.t += 1
        service.on_frame(frame(clock.t, 11.9, gpus=4, lost=(2,)))
        machine.heal("gpu_lost", gpu=2)  # reset: the board's own clocks again
        clock.t += 1
        service.on_frame(frame(clock.t, 11.9, gpus=4))
        await settle(service)
        assert events.kinds()[-1] == "guard_extended"
        assert service.reading().actions_last_hour == 2
        clock.t += 31
        service.on_frame(frame(clock.t, 11.9, gpus=4))
        await settle(service)
        assert events.kinds()[-1] == "guard_restored"
        assert service.reading().actions_last_hour == 3
        clock.t += 3600
        assert service.reading().actions_last_hour == 0  # an hour later none is within the hour
        await asyncio.to_thread(service.close)


async def test_holding_names_the_gpus_whose_caps_are_in_force(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    """Before: ``guard_holding`` said "the caps on GPUs 0,1,2,3 stay in force" of GPU 1, which has none."""
    events, clock = Events(), Clock()
    async with engaged_with_gpu_1_unpaired(tmp_path, machine, events, clock) as service:
        for _ in range(5):
            clock.t += 10
            f = frame(clock.t, 11.9, gpus=4)
            service.on_frame(replace(f, readings=replace(f.readings, psu_rail=None),
                                     collectors={"psu": CollectorStatus("error", False, "/dev/x: gone")}))
            await settle(service)
        (_, holding, data), = [item for item in events.items if item[0] == "guard_holding"]
        assert "the caps on GPUs 0,2,3 (step 1) stay in force" in holding and data["gpus"] == "0,2,3"
