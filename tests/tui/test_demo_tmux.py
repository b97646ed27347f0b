"""The real `rigmon demo` in a terminal under tmux: nodes and figures on screen, keys work, q exits cleanly."""

from __future__ import annotations

import os
import random
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.tui.tmux_server import tmux, tmux_command

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 60.0

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def wait_screen(session: str, ok: Callable[[str], bool]) -> str:
    """Capture the pane until ``ok`` accepts it (bounded; fails with the last screen)."""
    deadline = time.monotonic() + WAIT_S
    screen = ""
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", session)
        if ok(screen):
            return screen
        time.sleep(0.3)
    pytest.fail(f"screen never matched; last screen:\n{screen}")


def test_demo_in_a_terminal(tmp_path: Path) -> None:
    session = f"rigmon-demo-{os.getpid()}"
    seed = str(random.Random().randrange(10**6, 10**7))  # names this run's simulator process
    exit_file = tmp_path / "exit-status"
    # The shell records the exit status itself: tmux does not always report it for a dead pane.
    # The tmux server may be older than this test run: hand the demo the suite's HOME and XDG
    # directories, so its log file (and anything else it keeps) stays out of the real ones.
    env = " ".join(f"{k}={shlex.quote(os.environ[k])}" for k in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                                                                  "XDG_STATE_HOME", "XDG_CACHE_HOME",
                                                                  "RIGMON_AGENT_STATE_DIR", "TMPDIR") if k in os.environ)
    command = (f"cd {REPO} && env {env} PYTHONPATH={REPO} {sys.executable} -m rigmon demo --nodes 3 --seed {seed}; "
               f"echo $? > {exit_file}")
    tmux("new-session", "-d", "-s", session, "-x", "100", "-y", "30", command)
    try:
        tmux("set-option", "-t", session, "remain-on-exit", "on")
        screen = wait_screen(session, lambda s: all(f"node0{i}" in s for i in (1, 2, 3))
                             and s.count("live") >= 3 and "%" in s and "MB/s" in s)
        assert "3 nodes" in screen
        tmux("send-keys", "-t", session, "Down")
        time.sleep(0.5)
        tmux("send-keys", "-t", session, "Enter")
        # The node screen opens on its incident timeline; sources the node does not have are
        # folded into one line at the bottom, never boxes at the top.
        screen = wait_screen(session, lambda s: "Incident" in s and "run" in s)
        assert "node0" in screen and "not present" not in screen.split("run", 1)[0]
        tmux("send-keys", "-t", session, "Escape")
        wait_screen(session, lambda s: "rail 60s" in s)
        time.sleep(0.5)  # an Escape followed at once by a key reads as Alt+key
        tmux("send-keys", "-t", session, "q")
        wait_screen(session, lambda s: exit_file.exists() and exit_file.read_text().strip() != "")
        assert exit_file.read_text().strip() == "0"
        deadline = time.monotonic() + WAIT_S
        while shutil.which("pgrep") and subprocess.run(["pgrep", "-f", f"rigmon sim .*--seed {seed}"], capture_output=True).returncode == 0:
            assert time.monotonic() < deadline, "the demo left its simulator running"
            time.sleep(0.2)
    finally:
        subprocess.run(tmux_command("kill-session", "-t", session), capture_output=True)


def test_a_demo_whose_terminal_closes_leaves_no_token_behind(tmp_path: Path) -> None:
    # A closed terminal (or tmux kill-session) sends SIGHUP, which ends the demo without its clean-up:
    # its control token's directory stayed in /tmp. The demo removes it once its agents have read it.
    session = f"rigmon-demo-hup-{os.getpid()}"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = " ".join(f"{k}={shlex.quote(os.environ[k])}" for k in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                                                                  "XDG_STATE_HOME", "XDG_CACHE_HOME") if k in os.environ)
    command = f"cd {REPO} && env {env} TMPDIR={tmp} PYTHONPATH={REPO} {sys.executable} -m rigmon demo --nodes 2"
    tmux("new-session", "-d", "-s", session, "-x", "100", "-y", "30", command)
    try:
        wait_screen(session, lambda s: all(f"node0{i}" in s for i in (1, 2)) and s.count("live") >= 2)
    finally:
        subprocess.run(tmux_command("kill-session", "-t", session), capture_output=True)
    # The simulator child ends with its parent (SIGTERM) and removes its rig's directory.
    deadline = time.monotonic() + WAIT_S
    while list(tmp.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not list(tmp.glob("rigmon-demo-*")), list(tmp.iterdir())
