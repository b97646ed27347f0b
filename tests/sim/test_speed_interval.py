"""A simulated rig at ``--speed X``: its agents tick once a real second, X seconds apart on their own
(simulated) clock, and must report that interval (/v1/info, /metrics, the staleness rule), not 1 s."""

from __future__ import annotations

from pathlib import Path

import httpx

from rigmon.agent.agent import Agent
from rigmon.clock import SystemClock, clock_speed
from rigmon.config import AgentConfig, AgentSection
from rigmon.sim.clock import SimClock
from rigmon.sim.rig import running_rig


def test_the_interval_an_agent_reports_is_on_its_own_clock(tmp_path: Path) -> None:
    config = AgentConfig(agent=AgentSection(node="n1", root=str(tmp_path), state_dir=str(tmp_path / "s"),
                                            interval_s=2.0))
    fast = Agent(config, clock=SimClock(30.0))
    real = Agent(config, clock=SystemClock())
    try:
        assert fast.info().interval_s == 60.0 and fast.frame_interval_s == 60.0
        assert set(fast.alarms.engine.intervals.values()) == {60.0}
        assert fast.sampler.interval_s == 2.0  # it still ticks every 2 real seconds
        assert real.info().interval_s == 2.0 and set(real.alarms.engine.intervals.values()) == {2.0}
    finally:
        fast.sampler.close()
        real.sampler.close()
    assert clock_speed(SystemClock()) == 1.0 and clock_speed(SimClock(0.5)) == 0.5


async def test_a_rig_at_speed_30_reports_the_spacing_of_its_frames() -> None:
    async with running_rig("healthy-v100", 1, base_port=0, speed=30.0) as rig:
        async with httpx.AsyncClient() as client:
            info = (await client.get(f"{rig.urls[0]}/v1/info")).json()
            metrics = (await client.get(f"{rig.urls[0]}/metrics")).text
    assert info["interval_s"] == 30.0
    assert 'rigmon_collector_interval_seconds{collector="gpu",node="node01"} 30.0' in metrics
