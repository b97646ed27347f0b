"""``rigmon snapshot --journal`` of journals that are not in their best shape: on a read-only file
system, damaged (cut short, bad pages), of a newer format, set aside by the agent."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rigmon.agent.journal import JournalStore
from rigmon.snapshot.bundle import read_bundle
from tests.agent.test_journal import T0, FakeClock, frame

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def snapshot_cmd(journal: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "rigmon", "snapshot", "--journal", str(journal), "--since", "1h", "-o", str(out)]


def run_in_read_only_dir(directory: Path, cmd: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` while ``directory`` cannot be written (a read-only mount for root, mode 0555 otherwise)."""
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            return subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=REPO, timeout=60)
        finally:
            directory.chmod(0o755)
    # Root writes whatever the mode: a read-only bind mount, in a mount namespace of the command's own.
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("root without unshare/mount: cannot make a read-only directory")
    d = shlex.quote(str(directory))
    script = f"mount --bind {d} {d} && mount -o remount,bind,ro {d} && exec {shlex.join(cmd)}"
    proc = subprocess.run(["unshare", "--mount", "sh", "-c", script], capture_output=True, text=True, env=ENV,
                          cwd=REPO, timeout=60)
    if proc.returncode != 0 and "mount" in proc.stderr and "rigmon" not in proc.stderr:
        pytest.skip(f"cannot make a read-only mount here: {proc.stderr.strip()}")
    return proc


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["clean", "crash"])
def test_a_journal_on_a_read_only_file_system_is_read(tmp_path: Path, stop: str) -> None:
    # A dead node's disk mounted read-only: SQLite cannot create the WAL index (-shm) there.
    state = tmp_path / "state"
    state.mkdir()
    store = JournalStore(state, FakeClock())
    store.write([frame(i + 1, T0 + i, 11.9 - i / 1000) for i in range(30)])
    if stop == "clean":
        store.close()
    else:
        # kill -9: the last frames are only in the WAL; the copy has no -shm beside it.
        crashed = tmp_path / "crashed"
        crashed.mkdir()
        for name in ("journal.sqlite3", "journal.sqlite3-wal"):
            shutil.copyfile(state / name, crashed / name)
        store.close()
        state = crashed
    assert (state / "journal.sqlite3-wal").exists() == (stop == "crash")
    out = tmp_path / "snap.tar.gz"
    proc = run_in_read_only_dir(state, snapshot_cmd(state, out))
    assert proc.returncode == 0, proc.stderr
    (node,) = read_bundle(out).nodes
    assert [f.seq for f in node.frames] == list(range(1, 31))
    assert sorted(p.name for p in state.iterdir()) == (
        ["journal.sqlite3"] if stop == "clean" else ["journal.sqlite3", "journal.sqlite3-wal"])
