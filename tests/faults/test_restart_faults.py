"""Fault matrix, agent killed and restarted while a dashboard client follows it.

The client (rigmon.cluster.client, as the dashboard uses it) resumes on the new run and
backfills it from /v1/samples, so each run's history has no hole; the dead run's last frames
it had not seen come from the restarted agent's journal (tests/faults/test_journal_backfill.py).
This test shows the journal holds them (all but the last uncommitted instant).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

from rigmon.clock import SystemClock
from rigmon.cluster.client import (
    AgentClient,
    Backoff,
    Connected,
    Failed,
    GapReported,
    Sampled,
    Update,
)
from rigmon.cluster.store import NodeStore, contiguous
from rigmon.schema import Frame, History, decode
from rigmon.sim.tree import write_tree
from tests.ports import free_port as free_port

REPO = Path(__file__).resolve().parents[2]
#: The journal commits at least this often: a kill -9 loses at most about this much.
COMMIT_S = 0.1



def start_agent(tmp_path: Path, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "rigmon", "agent", "--config", str(tmp_path / "agent.toml"), "--root",
         str(tmp_path / "root"), "--state-dir", str(tmp_path / "state"), "--listen", f"127.0.0.1:{port}",
         "--node", "n1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})


async def test_killed_and_restarted_agent_leaves_no_hole_in_either_run(tmp_path: Path) -> None:
    write_tree(tmp_path / "root", {"/proc/stat": "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n",
                                   "/proc/uptime": "100.0 50.0\n"})
    (tmp_path / "agent.toml").write_text(f"[agent]\ninterval_s = 0.1\n[journal]\ncommit_interval_s = {COMMIT_S}\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    client = AgentClient(url, backoff=Backoff(0.05, 0.2))
    store = NodeStore(url, url, SystemClock())
    frames: list[Frame] = []
    gaps: list[object] = []
    updates = client.follow()

    async def until(done: Callable[[Update], bool]) -> None:
        async def run() -> None:
            async for update in updates:
                if isinstance(update, Connected):
                    store.connected(update.info)
                elif isinstance(update, Sampled):
                    frames.extend(update.frames)
                    store.add_frames(update.frames)
                elif isinstance(update, GapReported):
                    gaps.append(update.gap)
                elif isinstance(update, Failed):
                    store.failed(update.reason)
                if done(update):
                    return
        await asyncio.wait_for(run(), 30)

    first = start_agent(tmp_path, port)
    second: subprocess.Popen[bytes] | None = None
    try:
        await until(lambda u: len(frames) >= 20)
        first.send_signal(signal.SIGKILL)
        first.wait()
        await until(lambda u: isinstance(u, Failed))
        assert store.state() in ("live", "unreachable") and store.error is not None
        second = start_agent(tmp_path, port)
        run_a = frames[0].run_id
        await until(lambda u: sum(f.run_id != run_a for f in frames) >= 10)
        async with httpx.AsyncClient(base_url=url) as http:
            body = (await http.get("/v1/history", params={"from": repr(frames[0].taken_at - 1),
                                                          "to": repr(frames[-1].taken_at + 1),
                                                          "frames": "1"})).content
    finally:
        await updates.aclose()
        await client.aclose()
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(10)

    old = [f for f in frames if f.run_id == run_a]
    new = [f for f in frames if f.run_id != run_a]
    # Each run's history is whole: the old one up to the kill, the new one from its first frame.
    assert contiguous([f.seq for f in old]) and contiguous([f.seq for f in new])
    assert new[0].seq == 1 and store.restarts == 1 and store.state() == "live"
    assert gaps == []
    # What the client held of the dead run is in the restarted agent's journal, but for the
    # frames of the last instant before the kill (not committed yet).
    history = decode(History, body)
    journaled = {(f.run_id, f.seq) for f in history.frames}
    committed = [f for f in old if f.taken_at <= old[-1].taken_at - 5 * COMMIT_S]
    assert committed and all((f.run_id, f.seq) in journaled for f in committed)
    # The restarted agent said what happened.
    unclean = [e for f in new for e in f.events if e.kind == "unclean_shutdown"]
    assert len(unclean) == 1 and run_a in str(unclean[0].data.get("previous_run_id"))
