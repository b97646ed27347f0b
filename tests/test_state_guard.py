"""The suite's guard of the machine's real state: what it detects, and that agents are redirected."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from rigmon.sim import write_tree
from tests.state_guard import differences, fingerprint, real_default_paths

REPO = Path(__file__).resolve().parent.parent


def test_fingerprint_sees_files_created_changed_and_removed(tmp_path: Path) -> None:
    state = tmp_path / "var-lib-rigmon"
    (state / "sub").mkdir(parents=True)
    (state / "journal.sqlite3").write_bytes(b"x")
    (state / "old").write_text("1")
    watched = [state, tmp_path / "absent", tmp_path / "rigmon-dash-*"]
    before = fingerprint(watched)
    assert differences(before, fingerprint(watched)) == []
    (state / "alarm-state.json").write_text("{}")
    (state / "old").unlink()
    os.utime(state / "journal.sqlite3", ns=(1, 1))
    (tmp_path / "absent").mkdir()
    (tmp_path / "rigmon-dash-20250101-000000.svg").write_text("<svg/>")
    assert differences(before, fingerprint(watched)) == [
        f"created  {tmp_path / 'absent'}",
        f"created  {tmp_path / 'rigmon-dash-20250101-000000.svg'}",
        f"created  {state / 'alarm-state.json'}",
        f"removed  {state / 'old'}",
        f"modified {state / 'journal.sqlite3'}",
    ]


def test_real_paths_follow_the_callers_environment(tmp_path: Path) -> None:
    paths = real_default_paths({"HOME": "/home/op", "XDG_CONFIG_HOME": "/cfg"}, tmp_path)
    assert Path("/var/lib/rigmon") in paths and Path("/etc/rigmon") in paths
    assert Path("/cfg/rigmon") in paths and Path("/home/op/.local/share/rigmon") in paths
    assert Path("/home/op/.local/state/rigmon") in paths


def test_the_suite_runs_with_home_and_agent_state_in_a_temporary_directory() -> None:
    state_dir = Path(os.environ["RIGMON_AGENT_STATE_DIR"])
    for name in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        assert Path(os.environ[name]).is_relative_to(state_dir.parent), name
    assert not state_dir.parent.is_relative_to("/var/lib/rigmon")


def test_an_agent_started_without_state_dir_journals_in_the_redirected_one(tmp_path: Path) -> None:
    # The safety net behind every test that forgets --state-dir: as root the default would be
    # /var/lib/rigmon (the session's guard would then fail the run).
    write_tree(tmp_path / "root", {"/proc/stat": "cpu  1 0 1 10 0 0 0 0 0 0\ncpu0 1 0 1 10 0 0 0 0 0 0\n"})
    proc = subprocess.Popen([sys.executable, "-m", "rigmon", "agent", "--root", str(tmp_path / "root"),
                             "--listen", "127.0.0.1:0", "--node", "guard"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=tmp_path)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert f"journal in {os.environ['RIGMON_AGENT_STATE_DIR']}" in line, line
        journal = Path(os.environ["RIGMON_AGENT_STATE_DIR"]) / "journal.sqlite3"
        deadline = time.monotonic() + 20
        while not journal.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert journal.exists()
    finally:
        proc.terminate()
        proc.wait(10)
