"""What a long-running command cannot start with is a one-line error and exit 2, before it starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_cli import ENV, REPO


def rigmon(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rigmon", *args], capture_output=True, text=True, timeout=60,
                          env=env or ENV, cwd=REPO, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("command", [
    ["agent", "--listen", "127.0.0.1:0", "--state-dir", "STATE"],
    ["sim", "--base-port", "0", "--duration", "1"],
    ["dash", "127.0.0.1:1"],
    ["demo"],
])
def test_a_log_file_that_cannot_be_written_is_refused_before_the_start(tmp_path: Path, command: list[str]) -> None:
    argv = [str(tmp_path / "state") if word == "STATE" else word for word in command]
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    below = blocker / "logs" / "rigmon.log"
    done = rigmon(*argv, "--log-file", str(below))
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"rigmon: --log-file {below}: cannot write to it: Not a directory\n"
    beside = blocker / "rigmon.log"
    done = rigmon(*argv, "--log-file", str(beside))
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"rigmon: --log-file {beside}: cannot write to it: {blocker} is not a directory\n"


def test_the_dashboards_own_log_file_is_named_when_it_cannot_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "state"
    blocker.write_text("")
    done = rigmon("dash", "127.0.0.1:1", env={**ENV, "XDG_STATE_HOME": str(blocker)})
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"rigmon: log file {blocker}/rigmon/dash.log: cannot write to it: Not a directory\n"


@pytest.mark.parametrize(("mode", "why"), [(0o644, "is readable or writable by other users; chmod 600 it"),
                                           (None, ": No such file or directory")])
def test_sim_refuses_a_control_token_file_its_agents_would_refuse(tmp_path: Path, mode: int | None, why: str) -> None:
    token = tmp_path / "control.token"
    if mode is not None:
        token.write_text("a-control-token-of-some-length\n")
        token.chmod(mode)
    done = rigmon("sim", "--base-port", "0", "--duration", "1", "--control-token-file", str(token))
    assert done.returncode == 2, done.stderr
    separator = "" if why.startswith(":") else " "
    assert done.stderr == f"rigmon: --control-token-file {token}{separator}{why}\n"
    assert done.stdout == ""


def test_sim_tree_only_under_a_file_is_refused_before_the_rig_starts(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for folder, why in ((blocker, "is not a directory"), (blocker / "trees", "cannot make it: Not a directory")):
        done = rigmon("sim", "--tree-only", str(folder), "--duration", "1")
        assert done.returncode == 2, done.stderr
        assert (done.stdout, done.stderr) == ("", f"rigmon: --tree-only {folder}: {why}\n")
