"""A stopping agent's guard: the restore it makes goes out as an event (journal, notifiers, /v1/events)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rigmon.agent.agent import Agent
from rigmon.config import AgentConfig, AgentSection, GuardSection
from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.agent.guard_helpers import DEADLINE_S, frame


async def test_the_restore_at_stop_is_in_a_frame(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    """It was left queued for a frame that never came: the journal showed the caps engaged, never restored."""
    with serving(tmp_path / "root", machine):
        config = AgentConfig(agent=AgentSection(node="t", root=str(tmp_path / "root"),
                                                state_dir=str(tmp_path / "state"), interval_s=0.2),
                             guard=GuardSection(enabled=True, mode="enforce", gpus=(0, 1, 2, 3)))
        agent = Agent(config, token="read", control_token="ctl", collectors={})
        seen: list[str] = []
        agent.sampler.add_listener(lambda f: seen.extend(e.kind for e in f.events))
        agent.start()
        assert agent.guard is not None
        for _ in range(int(DEADLINE_S / 0.05)):
            if agent.guard.reading().acting:
                break
            await asyncio.sleep(0.05)
        agent.guard.on_frame(frame(agent.sampler.clock.time(), 11.2))
        for _ in range(int(DEADLINE_S / 0.05)):
            if "guard_engaged" in seen:
                break
            await asyncio.sleep(0.05)
        assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1005] * 4
        await agent.stop()
    assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312] * 4
    assert seen.count("guard_restored") == 1
