"""A state directory the agent cannot use is refused at start (exit 2, naming the key or flag and why);
one that becomes unusable while the agent runs leaves it sampling, the journal reporting the error."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rigmon.agent.state_lock import LOCK_FILE, StateDirUnusable, StateLock
from rigmon.cli_agent import state_dir_origin
from tests.agent.test_alarm_state import make_agent, settle
from tests.agent.test_alarms import wait_for
from tests.alarms.helpers import T0, FakeClock

REPO = Path(__file__).resolve().parents[2]
#: Longest a refusal may take (it is at once: nothing is started).
TIMEOUT_S = 30


def agent(tmp_path: Path, *args: str, state_env: str | None = None) -> subprocess.CompletedProcess[str]:
    """``rigmon agent`` with ``args``, ``RIGMON_AGENT_STATE_DIR`` set to ``state_env`` (else unset: the
    suite sets it to a directory of its own, and it would win over the file's key)."""
    env = {k: v for k, v in os.environ.items() if k != "RIGMON_AGENT_STATE_DIR"}
    if state_env is not None:
        env["RIGMON_AGENT_STATE_DIR"] = state_env
    return subprocess.run(
        [sys.executable, "-m", "rigmon", "agent", "--root", str(tmp_path), "--listen", "127.0.0.1:0", *args],
        capture_output=True, text=True, timeout=TIMEOUT_S, env={**env, "PYTHONPATH": str(REPO)}, check=False)


def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "state"
    path.write_text("not a directory\n")
    return path


def test_a_state_dir_that_is_a_file_is_refused_naming_the_flag(tmp_path: Path) -> None:
    """It announced "journal in ...", then ran with no journal, no lock and no alarm state, saying so
    only in warnings."""
    state = a_file(tmp_path)
    out = agent(tmp_path, "--state-dir", str(state))
    assert out.returncode == 2, out.stderr
    assert f"rigmon: --state-dir {state}: exists and is not a directory" in out.stderr
    assert "journal in" not in out.stdout


def test_a_state_dir_below_a_file_is_refused_naming_the_key_of_the_file(tmp_path: Path) -> None:
    state = a_file(tmp_path) / "node1"  # its parent cannot be made
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\nstate_dir = "{state}"\n')
    out = agent(tmp_path, "--config", str(config))
    assert out.returncode == 2, out.stderr
    assert f"rigmon: {config}: agent.state_dir {state}: cannot be made: a path above it is not a directory" \
        in out.stderr
    assert "journal in" not in out.stdout


def test_a_state_dir_from_the_environment_names_the_variable(tmp_path: Path) -> None:
    state = a_file(tmp_path)
    out = agent(tmp_path, state_env=str(state))
    assert out.returncode == 2, out.stderr
    assert f"rigmon: environment RIGMON_AGENT_STATE_DIR {state}: exists and is not a directory" in out.stderr


def test_origin_of_a_default_state_dir() -> None:
    args = argparse.Namespace(state_dir=None, config=None)
    assert state_dir_origin(args, given=False, environ={}).startswith("state directory (the default")
    assert state_dir_origin(argparse.Namespace(state_dir="/x", config=None), given=True, environ={}) == "--state-dir"


def test_a_lock_file_that_cannot_be_opened_is_refused(tmp_path: Path) -> None:
    (tmp_path / LOCK_FILE).mkdir()
    with pytest.raises(StateDirUnusable, match=f"state directory {tmp_path}: cannot open its lock file "
                                                f"{LOCK_FILE}: Is a directory"):
        StateLock(tmp_path)


def test_a_missing_state_dir_is_made_with_the_directories_above(tmp_path: Path) -> None:
    lock = StateLock(tmp_path / "new" / "state")
    assert lock.held and (tmp_path / "new" / "state" / LOCK_FILE).is_file()
    lock.release()


async def test_a_state_dir_removed_while_the_agent_runs_does_not_stop_it(tmp_path: Path) -> None:
    """Only the start refuses: a state directory removed later is no reason to stop watching the node
    (the lock, taken at the start, is not taken again)."""
    state = tmp_path / "state"
    clock = FakeClock(T0)
    running, probe = make_agent(state, clock)
    running.start()
    try:
        await wait_for(lambda: probe.push is not None)
        await settle(running, clock, 1.0, probe, probe=50.0)
        shutil.rmtree(state)
        for step in range(2, 6):
            frame = await settle(running, clock, float(step), probe, probe=95.0)
        assert frame.taken_at == T0 + 5.0 and "journal" in frame.collectors
        assert [alarm.rule for alarm in running.alarms.engine.active()] == ["hot"]  # still judged
    finally:
        await running.stop()  # returns: what cannot be written is said in the log, not raised


def test_a_guard_alone_keeps_state_and_is_refused_an_unusable_state_dir(tmp_path: Path) -> None:
    """With the journal and the alarm state off, the guard still keeps the GPUs' original settings in
    the state directory (guard-state.json): it was written there without the lock or this check."""
    state = a_file(tmp_path)
    config = tmp_path / "agent.toml"
    config.write_text("[guard]\nenabled = true\n[journal]\nenabled = false\n[alarms]\npersist = false\n")
    out = agent(tmp_path, "--config", str(config), "--state-dir", str(state))
    assert out.returncode == 2, out.stderr
    assert f"rigmon: --state-dir {state}: exists and is not a directory" in out.stderr
