"""A bundle read from a journal (`rigmon snapshot --journal`) lists the alarms its agent had firing when
it last saved its alarm state: with no agent to ask, an incident older than the window still firing at
the crash must not read as a quiet node."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rigmon.agent.alarm_state import read_state_file, state_file_path
from rigmon.sim.rig import running_rig
from rigmon.snapshot.journal_part import read_journal
from rigmon.snapshot.report import render_report


async def record_incident(workdir: Path) -> Path:
    """Run the undervolt scenario's node until its agent has saved the GPU it lost as a firing alarm;
    stop it cleanly and return its state directory."""
    state = workdir / "state" / "node01"
    async with running_rig("undervolt-bus-drop", 1, base_port=0, speed=4, workdir=workdir, interval_s=0.25):
        for _ in range(3000):
            saved = read_state_file(state_file_path(state)) if state_file_path(state).exists() else None
            if saved is not None and "gpu_lost" in {c.alarm.rule for c in saved.engine.alarms}:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the agent never saved the lost GPU's alarm")
        # Frames go on a few seconds past the incident: the window below ends after it.
        await asyncio.sleep(2.0)
    return state


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return asyncio.run(record_incident(tmp_path_factory.mktemp("sim")))


def test_the_alarms_saved_beside_the_journal_are_in_the_report(state: Path) -> None:
    # A window of the last second: the GPU was lost before it, its alarm's events are not in it.
    part = read_journal(state, 1.0)
    assert not any(e.data.get("rule") == "gpu_lost" for e in part.events)
    # Before, a journal's part had no alarms at all, and the report said nothing of them.
    assert part.alarms is not None and part.alarms_saved_at is not None
    assert {"gpu_lost", "gpu_xid_fatal"} <= {a.rule for a in part.alarms}
    assert all(a.state == "firing" for a in part.alarms)
    report = render_report([part], 1.0, part.alarms_saved_at + 60)
    assert "Alarms active when the agent last saved its alarm state (" in report
    assert "| gpu_lost | critical | firing | gpu:3 |" in report


def test_a_damaged_alarm_state_is_said_so(state: Path) -> None:
    path = state_file_path(state)
    kept = path.read_bytes()
    try:
        path.write_text("{not json")
        part = read_journal(state, 1.0)
    finally:
        path.write_bytes(kept)
    assert part.alarms is None
    assert any(e.startswith(f"no saved alarms: {path}: not JSON") for e in part.capture_errors)
