"""Incident 3's PSU trip loop: the node resets again and again within the ``unclean_shutdown`` alarm's latch.

Real agent processes on one state directory, killed with SIGKILL (what a power cut leaves): the alarm is one
episode from the first reset on (its id, its start), and its count and message follow every reset. Each start
takes over what the run before had counted from ``alarm-state.json``: the count is saved when it moves, as a
firing is, not at the next periodic save a minute later (a node that reset again within that minute read
"2 events since ..." after its third unclean shutdown).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from rigmon.agent.alarm_state import STATE_FILE_NAME, read_state_file
from tests.agent.test_journal_crash import (
    ENV,
    REPO,
    frames_of,
    make_root,
    newest_run,
    wait_for,
)
from tests.faults.test_restart_faults import free_port

pytestmark = pytest.mark.slow

RESETS = 3


def start_agent(root: Path, state: Path, config: Path, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "rigmon", "agent", "--root", str(root), "--state-dir", str(state),
         "--listen", f"127.0.0.1:{port}", "--config", str(config), "--node", "crashy"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV, cwd=REPO)


def unclean_alarm(port: int) -> dict[str, Any] | None:
    """The agent's active ``unclean_shutdown`` alarm as ``/v1/alarms`` gives it (``None``: none, or no answer yet)."""
    try:
        answer = httpx.get(f"http://127.0.0.1:{port}/v1/alarms", timeout=5.0).json()
    except httpx.HTTPError:
        return None
    return next((a for a in answer["active"] if a["rule"] == "unclean_shutdown"), None)


def saved_count(state: Path) -> int | None:
    """The ``count`` of the ``unclean_shutdown`` alarm in the state file: what a crash now leaves the next start."""
    saved = read_state_file(state / STATE_FILE_NAME)
    if saved is None:
        return None
    return next((c.alarm.count for c in saved.engine.alarms if c.alarm.rule == "unclean_shutdown"), None)


def test_a_node_that_resets_again_and_again_counts_every_unclean_shutdown_since_the_first(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    state = tmp_path / "state"
    db = state / "journal.sqlite3"
    config = tmp_path / "agent.toml"
    config.write_text("[agent]\ninterval_s = 0.2\n\n[journal]\ncommit_interval_s = 0.5\n")
    previous: str | None = None
    first: dict[str, Any] | None = None
    alarm: dict[str, Any] | None = None
    for resets in range(RESETS + 1):
        port = free_port()
        proc = start_agent(root, state, config, port)
        try:
            wait_for("the new run", lambda before=previous: db.exists() and newest_run(db) != before, proc)
            run_id = previous = newest_run(db)
            wait_for("frames", lambda run_id=run_id: frames_of(db, run_id) >= 2, proc)
            if resets:
                wait_for(f"the alarm counting {resets}",
                         lambda port=port, resets=resets: (unclean_alarm(port) or {}).get("count") == resets, proc)
                alarm = unclean_alarm(port)
                assert alarm is not None
                first = first or alarm
                # One episode since the first reset: its id and start stay, the latest reset speaks.
                assert (alarm["id"], alarm["started_at"], alarm["state"]) == (first["id"], first["started_at"], "firing")
                assert alarm["message"].startswith("node restarted unexpectedly; last frame ")
                stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(alarm["started_at"]))
                assert alarm["message"].endswith(f" ({resets} events since {stamp} UTC)" if resets > 1 else "before this start")
                if resets < RESETS:
                    wait_for(f"the count {resets} saved", lambda resets=resets: saved_count(state) == resets, proc)
            if resets < RESETS:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(15)
    assert alarm is not None and alarm["count"] == RESETS
