"""A bundle holds every event its frames carry, also one stamped after the window's last frame: the window ends
at the latest frame's ``taken_at``, and the kernel log's report of an Xid is stamped by the kernel's clock, later
than the frame that carries it (and than the frame an ADC reading pushed right after it)."""

from __future__ import annotations

import gzip
from pathlib import Path

import httpx
import pytest

from rigmon.agent.agent import Agent
from rigmon.agent.journal import JournalStore
from rigmon.config import AgentConfig, AgentSection
from rigmon.schema import Frame
from rigmon.snapshot.bundle import frames_gzip, read_bundle, write_bundle
from rigmon.snapshot.journal_part import read_journal
from rigmon.snapshot.pull import pull_agent
from rigmon.snapshot.report import render_report
from tests.agent.journal_frames import FakeClock
from tests.agent.test_api import Counter
from tests.tui.snapshot_apps.record_frames import load_frames

#: A real agent's frames of undervolt-bus-drop (the simulator's rig): GPU 3 falls off the bus in frame seq 20, its
#: Xid 79 reported by NVML and by the kernel log; the kernel log's report is stamped 0.12 s after that frame, and
#: after frame 21 too (pushed 14 ms after it).
FRAMES = load_frames("v100-gpu-lost-rail-sag")


def _upto(seq: int) -> list[Frame]:
    return [f for f in FRAMES if f.seq <= seq]


def _kmsg_xid_frame() -> Frame:
    (frame,) = [f for f in FRAMES if any(e.kind == "xid" and e.data.get("source") == "kmsg" for e in f.events)]
    return frame


def test_the_recorded_frames_hold_an_xid_stamped_after_the_frames_that_end_the_window() -> None:
    # What the tests below rest on, from the recording itself.
    frame = _kmsg_xid_frame()
    (xid,) = [e for e in frame.events if e.data.get("source") == "kmsg"]
    (after,) = [f for f in FRAMES if f.seq == frame.seq + 1]
    assert frame.taken_at < after.taken_at < xid.at


def _crashed_journal(tmp_path: Path, frames: list[Frame]) -> Path:
    """A journal of ``frames`` whose run never stopped (the node lost power after its last frame)."""
    state = tmp_path / "state"
    state.mkdir()
    store = JournalStore(state, FakeClock(frames[-1].taken_at))
    store.begin_run(frames[0].run_id, frames[0].node, frames[0].agent_start)
    store.write(frames)
    store.close()
    return state


@pytest.mark.parametrize("last_seq", [20, 21])
def test_a_journal_snapshot_keeps_the_xid_its_last_frames_carry(tmp_path: Path, last_seq: int) -> None:
    frames = _upto(last_seq)
    part = read_journal(_crashed_journal(tmp_path, frames), 3600.0)
    assert part.to_at == frames[-1].taken_at
    sources = sorted(str(e.data["source"]) for e in part.events if e.kind == "xid")
    assert sources == ["kmsg", "nvml"]
    # Each once, by its own time.
    assert list(part.events) == sorted((e for f in frames for e in f.events), key=lambda e: e.at)
    report = render_report([part], 3600.0, frames[-1].taken_at + 5)
    bundle = read_bundle(write_bundle(tmp_path / "b.tar.gz", [part], 3600.0, report))
    (node,) = bundle.nodes
    assert sorted(str(e.data["source"]) for e in node.events if e.kind == "xid") == ["kmsg", "nvml"]
    assert node.history is not None and len(node.history.events) == len(node.events)  # series.json says the same
    assert bundle.manifest["nodes"][0]["events"] == len(node.events)
    (listed,) = [line for line in bundle.report.splitlines() if line.startswith("- ") and "`xid`" in line]
    assert listed.endswith("(NVML and kernel log)")


async def test_an_agent_snapshot_keeps_the_xid_its_last_frame_carries_and_not_later_frames_events(
        tmp_path: Path) -> None:
    # The agent went on after its capture: its journal holds frames after the latest one the capture gave (the
    # window's end), whose events (GPU lost, alarms) are not the window's; the Xid the window's frames carry is.
    journaled = _upto(30)
    state = _crashed_journal(tmp_path, journaled)
    latest = _kmsg_xid_frame().seq + 1
    config = AgentConfig(agent=AgentSection(node="node01", root=str(tmp_path / "root"), state_dir=str(state)))
    agent = Agent(config, clock=FakeClock(journaled[-1].taken_at), collectors={"counter": Counter()})
    app = agent.app()
    assert agent.buffer is not None
    for frame in _upto(latest):
        agent.buffer.append(frame)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://agent") as client:
        part = await pull_agent(client, "http://agent", 3600.0)
    assert part.error is None and part.to_at == _upto(latest)[-1].taken_at
    assert list(part.events) == sorted((e for f in _upto(latest) for e in f.events), key=lambda e: e.at)
    bundle = read_bundle(write_bundle(tmp_path / "b.tar.gz", [part], 3600.0, ""))
    (node,) = bundle.nodes
    assert sorted(str(e.data["source"]) for e in node.events if e.kind == "xid") == ["kmsg", "nvml"]
    assert node.history is not None and [e.id for e in node.history.events] == [e.id for e in node.events]


def test_carried_events_are_read_from_the_frames_that_carry_any() -> None:
    from rigmon.snapshot.window_events import carried_events

    frames = _upto(25)
    every = [e.id for f in frames for e in f.events]
    assert [e.id for e in carried_events(frames_gzip(frames))] == every
    assert carried_events(b"") == []
    # A line that is no frame is skipped; a stream cut short keeps what it holds before the cut.
    spoilt = gzip.compress(b'{"events":[{"id":1}]}\n') + frames_gzip(frames)
    assert [e.id for e in carried_events(spoilt)] == every
    got = [e.id for e in carried_events(frames_gzip(frames)[:-200])]
    assert got == every[: len(got)]
