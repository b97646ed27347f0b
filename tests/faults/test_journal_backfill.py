"""A client that was away longer than the agent's ring buffer, or whose agent died, fills the
hole from the agent's journal (/v1/history), so the dashboard's history has none."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

from rigmon.cluster.client import AgentClient, Backoff, GapReported, Sampled, Update
from rigmon.cluster.store import contiguous
from rigmon.schema import Frame
from rigmon.sim.tree import write_tree
from tests.faults.test_restart_faults import free_port, start_agent

BUFFER_FRAMES = 5
INTERVAL_S = 0.1


def node(tmp_path: Path) -> None:
    write_tree(tmp_path / "root", {"/proc/stat": "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n",
                                   "/proc/uptime": "100.0 50.0\n"})
    (tmp_path / "agent.toml").write_text(f"[agent]\ninterval_s = {INTERVAL_S}\nbuffer_frames = {BUFFER_FRAMES}\n"
                                         "[journal]\ncommit_interval_s = 0.1\n")


async def follow_until(client: AgentClient, frames: list[Frame], gaps: list[object], count: int,
                       run_id: str | None = None) -> None:
    """Follow until ``count`` frames (of ``run_id``, if given) arrived, then stop following."""
    updates: AsyncIterator[Update] = client.follow()

    async def run() -> None:
        async for update in updates:
            if isinstance(update, Sampled):
                frames.extend(update.frames)
            elif isinstance(update, GapReported):
                gaps.append(update.gap)
            if sum(run_id is None or f.run_id == run_id for f in frames) >= count:
                return

    try:
        await asyncio.wait_for(run(), 30)
    finally:
        await updates.aclose()


async def test_a_gap_beyond_the_ring_buffer_is_filled_from_the_journal(tmp_path: Path) -> None:
    node(tmp_path)
    port = free_port()
    client = AgentClient(f"http://127.0.0.1:{port}", backoff=Backoff(0.05, 0.2), backfill_frames=0)
    agent = start_agent(tmp_path, port)
    frames: list[Frame] = []
    gaps: list[object] = []
    try:
        await follow_until(client, frames, gaps, 10)
        away_from = frames[-1].seq
        await asyncio.sleep(30 * INTERVAL_S)  # six times what the ring buffer holds goes by
        await follow_until(client, frames, gaps, len(frames) + 40)
    finally:
        await client.aclose()
        agent.terminate()
        agent.wait(10)
    assert gaps == [], "the journal held every frame the buffer had lost: no gap remains"
    seqs = [f.seq for f in frames]
    assert seqs[0] <= away_from < seqs[-1] - 30 and contiguous(seqs), seqs


async def test_the_dead_runs_last_frames_come_from_the_restarted_agents_journal(tmp_path: Path) -> None:
    node(tmp_path)
    port = free_port()
    client = AgentClient(f"http://127.0.0.1:{port}", backoff=Backoff(0.05, 0.2), backfill_frames=0)
    first = start_agent(tmp_path, port)
    second: subprocess.Popen[bytes] | None = None
    frames: list[Frame] = []
    gaps: list[object] = []
    try:
        await follow_until(client, frames, gaps, 10)
        run_a, seen = frames[0].run_id, frames[-1].seq
        await asyncio.sleep(20 * INTERVAL_S)  # the agent goes on while nobody watches...
        first.send_signal(signal.SIGKILL)  # ...and dies
        first.wait()
        second = start_agent(tmp_path, port)
        await follow_until(client, frames, gaps, 5, run_id=None)
        while not any(f.run_id != run_a for f in frames):
            await follow_until(client, frames, gaps, len(frames) + 1)
    finally:
        await client.aclose()
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(10)
    old = [f.seq for f in frames if f.run_id == run_a]
    assert contiguous(old) and old[-1] >= seen + 10, (seen, old)
