"""The operator's hold of the undervolt guard is an event of its own kind, not a step."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.agent.guard_helpers import ENFORCE, Clock, Events, engaged, settle


async def test_a_hold_is_a_guard_held_event_not_a_guard_step(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    """A rule or a reader keyed on ``guard_step`` (the guard capped further) must not take an
    operator's hold for one: it is ``guard_held``, with ``data.command = "hold"`` as before."""
    events, clock = Events(), Clock()
    with serving(tmp_path / "root", machine):
        service = await engaged(tmp_path, ENFORCE, events, clock)
        service.command("hold", "alice")
        await settle(service)
        held = events.items[-1]
        await asyncio.to_thread(service.close)
    kind, message, data = held
    assert events.kinds() == ["guard_engaged", "guard_held", "guard_restored"]  # the stop restores
    assert (kind, data["command"], data["by"], data["step"]) == ("guard_held", "hold", "alice", 1)
    assert message == "guard held by alice: settings stay until released"
