"""Crash safety: a real agent process killed with SIGKILL at random moments, again and again.

Every time the journal must open and pass SQLite's integrity check, hold every frame it had
committed before the kill (the writer commits as the run goes, every commit interval, so that is
all but the last interval's), and the next start must report an ``unclean_shutdown`` event; a
SIGTERM stop must not. (How long ago the last committed frame was taken is not asserted: on a
loaded machine the agent itself may lag, and tests assert on no wall-clock time.)
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rigmon.agent.journal import JournalReader
from rigmon.sim.host import SimHost
from rigmon.sim.node import SimNode
from rigmon.sim.tree import Tree

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
INTERVAL_S = 0.2
COMMIT_INTERVAL_S = 0.5
ROUNDS = 8

pytestmark = pytest.mark.slow


def make_root(path: Path) -> Path:
    node = SimNode(name="crashy", tree=Tree(path), rng=random.Random(3))
    node.devices.append(SimHost())
    node.load = 0.5
    node.step(0.0)
    node.step(1.0)
    return path


def start_agent(root: Path, state: Path, config: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "rigmon", "agent", "--root", str(root), "--state-dir", str(state),
         "--listen", "127.0.0.1:0", "--config", str(config), "--node", "crashy"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV, cwd=REPO)


def query(db: Path, sql: str, args: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def wait_for(what: str, check: object, proc: subprocess.Popen[bytes], timeout_s: float = 20.0) -> None:
    assert callable(check)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"agent exited ({proc.returncode}) waiting for {what}: {proc.stderr.read()!r}")  # type: ignore[union-attr]
        try:
            if check():
                return
        except (sqlite3.OperationalError, IndexError):
            pass  # the file or its tables do not exist yet, or the run is not recorded yet
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def newest_run(db: Path) -> str:
    return str(query(db, "SELECT run_id FROM runs ORDER BY started_at DESC, rowid DESC LIMIT 1")[0][0])


def events_of(db: Path, run_id: str, kind: str) -> list[tuple[object, ...]]:
    return query(db, "SELECT body FROM events WHERE run_id = ? AND kind = ?", (run_id, kind))


def frames_of(db: Path, run_id: str) -> int:
    return int(query(db, "SELECT COUNT(*) FROM frames WHERE run_id = ?", (run_id,))[0][0])  # type: ignore[call-overload]


def reader_last(db: Path, run_id: str) -> float:
    with JournalReader(db) as reader:
        return max(f.taken_at for f in reader.frames(0.0, 1e12) if f.run_id == run_id)


def last_frame(db: Path, run_id: str) -> float:
    """``taken_at`` of ``run_id``'s newest committed frame (what a reader sees is committed)."""
    (last,) = query(db, "SELECT MAX(taken_at) FROM frames WHERE run_id = ?", (run_id,))[0]
    assert isinstance(last, float)
    return last


def test_kill_9_at_random_moments_loses_only_the_uncommitted_frames(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    state = tmp_path / "state"
    db = state / "journal.sqlite3"
    config = tmp_path / "agent.toml"
    config.write_text(f"[agent]\ninterval_s = {INTERVAL_S}\n\n[journal]\ncommit_interval_s = {COMMIT_INTERVAL_S}\n")
    rng = random.Random(2024)
    previous: str | None = None
    for round_ in range(ROUNDS):
        proc = start_agent(root, state, config)
        try:
            wait_for("the new run", lambda: db.exists() and newest_run(db) != previous, proc)
            run_id = newest_run(db)
            wait_for("frames", lambda: frames_of(db, run_id) >= 2, proc)
            if previous is not None:
                wait_for("the unclean_shutdown event", lambda: events_of(db, run_id, "unclean_shutdown"), proc)
                (body,) = events_of(db, run_id, "unclean_shutdown")[0]
                assert previous in str(body) and "node restarted unexpectedly" in str(body)
            time.sleep(rng.uniform(0.0, 1.5))
            # Still committing as it runs: a frame newer than any before the pause is in (a writer
            # that only committed at its stop would lose the whole run to the kill).
            committed = last_frame(db, run_id)
            wait_for("a commit", lambda: last_frame(db, run_id) > committed, proc)
            committed = last_frame(db, run_id)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        assert query(db, "PRAGMA integrity_check") == [("ok",)], f"round {round_}"
        last = last_frame(db, run_id)
        assert last >= committed, f"round {round_}: a frame committed before the kill is gone"
        # Every committed frame reads back, the last one too: the block stream the kill left
        # open decompresses up to its last sync flush.
        with JournalReader(db) as reader:
            seqs = [f.seq for f in reader.frames(0.0, last + 1) if f.run_id == run_id]
        assert seqs == list(range(seqs[0], seqs[0] + frames_of(db, run_id))), f"round {round_}"
        assert reader_last(db, run_id) == last
        previous = run_id

    # A SIGTERM stop is clean: the next start reports nothing.
    proc = start_agent(root, state, config)
    wait_for("the new run", lambda: newest_run(db) != previous, proc)
    run_id = newest_run(db)
    wait_for("the unclean_shutdown event", lambda: events_of(db, run_id, "unclean_shutdown"), proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(15) == 0
    assert query(db, "SELECT clean FROM runs WHERE run_id = ?", (run_id,)) == [(1,)]
    proc = start_agent(root, state, config)
    try:
        wait_for("the new run", lambda: newest_run(db) != run_id, proc)
        clean_run = newest_run(db)
        wait_for("frames", lambda: frames_of(db, clean_run) >= 5, proc)
        assert events_of(db, clean_run, "unclean_shutdown") == []
        assert events_of(db, clean_run, "agent_started")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
