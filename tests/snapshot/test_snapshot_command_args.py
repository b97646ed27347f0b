"""``rigmon snapshot`` arguments that cannot give a bundle are refused before any pull, and a directory
given for a journal that holds state directories names them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rigmon.agent.journal import JournalStore
from rigmon.snapshot.journal_part import read_journal
from tests.agent.journal_frames import T0, FakeClock, frame

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _journal(state: Path) -> None:
    state.parent.mkdir(parents=True, exist_ok=True)
    store = JournalStore(state, FakeClock())
    store.write([frame(i + 1, T0 + i, 40.0) for i in range(5)])
    store.close()


def test_an_output_that_is_a_directory_is_refused_before_the_pull(tmp_path: Path) -> None:
    # Refused after the pull, exit 3, it cost the operator the whole pull (minutes of a large rig).
    _journal(tmp_path / "state")
    out = tmp_path / "bundles"
    out.mkdir()
    proc = subprocess.run([sys.executable, "-m", "rigmon", "snapshot", "--journal", str(tmp_path / "state"),
                           "-o", str(out)], capture_output=True, text=True, env=ENV, cwd=REPO, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert f"-o {out}: is a directory: name the bundle file to write (-o {out / 'bug.tar.gz'})" in proc.stderr
    assert "frames" not in proc.stderr  # nothing was pulled
    assert list(out.iterdir()) == []


def test_a_directory_of_state_directories_names_them(tmp_path: Path) -> None:
    # `rigmon sim`'s state/ (node01, node02 ...) given whole.
    for node in ("node01", "node02"):
        _journal(tmp_path / "state" / node)
    (tmp_path / "state" / "notes").mkdir()
    part = read_journal(tmp_path / "state", 3600)
    assert part.error is not None
    assert (f"(it holds the state directories {tmp_path / 'state' / 'node01'}, {tmp_path / 'state' / 'node02'}: "
            "give each as --journal DIR)") in part.error
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "state directories" not in (read_journal(empty, 3600).error or "")
