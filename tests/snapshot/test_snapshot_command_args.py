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


def test_counts_of_one_are_said_in_the_singular(tmp_path: Path) -> None:
    # A node's journal of one run: "1 nodes, 5 frames" and "1 runs" read as a typo in every one-node snapshot.
    state = tmp_path / "state"
    state.parent.mkdir(parents=True, exist_ok=True)
    store = JournalStore(state, FakeClock())
    store.begin_run("run1", "n1", T0)
    store.write([frame(1, T0, 40.0)])
    store.close()
    proc = subprocess.run([sys.executable, "-m", "rigmon", "snapshot", "--journal", str(state), "-o",
                           str(tmp_path / "bug.tar.gz")], capture_output=True, text=True, env=ENV, cwd=REPO,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    # Its last line (a journal without a stop is said first to have not stopped cleanly).
    assert proc.stdout.strip().splitlines()[-1] == f"{tmp_path / 'bug.tar.gz'}: 1 node, 1 frame"
    assert "[1/4] n1: 1 run\n" in proc.stderr and "[4/4] n1: 1 frame\n" in proc.stderr
