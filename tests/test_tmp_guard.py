"""The suite's temporary directory is its own, and simulated rigs' directories left in it are named."""

from __future__ import annotations

import os
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
