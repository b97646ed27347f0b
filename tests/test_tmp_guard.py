"""The suite's temporary directory is its own, and simulated rigs' directories left in it are named."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.tmp_guard import FILES_SHOWN, sim_leftovers


def test_the_suite_and_its_processes_use_a_temporary_directory_of_their_own(tmp_path: Path) -> None:
    tmp = Path(tempfile.gettempdir())
    assert os.environ["TMPDIR"] == str(tmp)
    assert tmp.name.startswith("rigmon-test-tmp-")
    assert tmp not in tmp_path.parents


def test_left_rig_directories_are_named_with_what_they_hold(tmp_path: Path) -> None:
    assert sim_leftovers(tmp_path) == []
    left = tmp_path / "rigmon-sim-abc"
    (left / "state" / "node01").mkdir(parents=True)
    (left / "state" / "node01" / "journal.sqlite3").write_text("")
    (left / "probe.key").write_text("")
    proc = left / "node01" / "proc"
    proc.mkdir(parents=True)
    for i in range(FILES_SHOWN + 2):
        (proc / f"f{i}").write_text("")
    (tmp_path / "rigmon-sim-empty").mkdir()
    (tmp_path / "rigmon-journal-x").mkdir()
    assert sim_leftovers(tmp_path) == [
        f"{left}: node01/ ({FILES_SHOWN + 2} files), probe.key, state/ (node01/journal.sqlite3)",
        f"{tmp_path / 'rigmon-sim-empty'}: empty",
    ]


def test_a_rig_left_in_a_pytest_xdist_workers_directory_fails_the_run(tmp_path: Path) -> None:
    """The suite runs in pytest-xdist workers (README's `-n 4`): a worker's own exit status does not
    reach the run's, so what its guard finds must fail the run through the controller."""
    (tmp_path / "conftest.py").write_text("from tests.conftest import *  # noqa: F403\n")
    (tmp_path / "test_leaves_a_rig.py").write_text(
        "import pathlib, tempfile\n\n\ndef test_leaves() -> None:\n"
        "    pathlib.Path(tempfile.gettempdir(), 'rigmon-sim-left').mkdir()\n")
    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(repo)}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "-c", os.devnull,
                          "--rootdir", str(tmp_path), "test_leaves_a_rig.py"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "1 passed" in out.stdout
    assert "simulated rigs left their directories (gw" in out.stdout and "rigmon-sim-left: empty" in out.stdout
