"""The guard at a node's start: a slow first nvmlInit (no persistence mode) is waited for, not a failure."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rigmon.config import GuardSection
from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.agent.guard_helpers import Clock, Events, make, settle

#: One NVML call's timeout here; the init takes several of them.
CALL_TIMEOUT_S = 0.2


async def test_a_slow_first_nvml_init_does_not_leave_the_guard_unable_to_act(tmp_path: Path,
                                                                              machine: FakeNvmlMachine) -> None:
    """Without persistence mode nvmlInit brings every GPU up first: the probe waits for it (on the
    guard's own thread) instead of reporting a hung call, staying in dry-run and saying it cannot act."""
    events, clock = Events(), Clock()
    config = GuardSection(enabled=True, mode="enforce", rail_count=1, call_timeout_s=CALL_TIMEOUT_S)
    with serving(tmp_path / "root", machine):
        machine.fail("hang", symbols=["nvmlInitWithFlags"])
        service = make(tmp_path, config, events, clock)
        service.start()
        await asyncio.sleep(4 * CALL_TIMEOUT_S)  # the init outlasts several call timeouts
        machine.heal("hang")
        await settle(service)
        reading = service.reading()
        await asyncio.to_thread(service.close)
    assert events.kinds() == []
    assert reading.acting and reading.reason is None
