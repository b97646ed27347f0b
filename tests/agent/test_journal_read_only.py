"""Opening a journal read-only: a journal this user may not read is said to be one, not to be missing."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rigmon.agent.journal import JournalError, JournalReader, JournalStore
from rigmon.agent.journal.read_only import check_journal_file, journal_file_error, open_read_only
from tests.agent.journal_frames import T0, FakeClock, frame

REPO = Path(__file__).resolve().parents[2]
#: Root reads whatever the mode: the check runs without the capabilities that let it (as root, still uid 0).
WITHOUT_DAC = ["setpriv", "--inh-caps=-dac_override,-dac_read_search", "--bounding-set=-dac_override,-dac_read_search"]


def test_the_open_error_of_an_unreadable_journal_names_permission() -> None:
    path = Path("/var/lib/rigmon/journal.sqlite3")
    denied = str(journal_file_error(path, PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))))
    assert denied.startswith(f"cannot read journal {path}: permission denied")
    assert "/var/lib/rigmon" in denied and "agent's user" in denied and "no journal" not in denied
    assert str(journal_file_error(path, FileNotFoundError(errno.ENOENT, "gone", str(path)))) == f"no journal at {path}"
    assert str(journal_file_error(path, NotADirectoryError(errno.ENOTDIR, "x", str(path)))) == f"no journal at {path}"
    assert str(journal_file_error(path, OSError(errno.EIO, os.strerror(errno.EIO)))) == (
        f"cannot read journal {path}: {os.strerror(errno.EIO)}")


def test_no_journal_and_not_a_file_are_no_journal(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="^no journal at "):
        JournalReader(tmp_path)
    (tmp_path / "journal.sqlite3").mkdir()
    with pytest.raises(JournalError, match="^no journal at "):
        check_journal_file(tmp_path / "journal.sqlite3")


def test_a_journal_opens_read_only_and_closes(tmp_path: Path) -> None:
    store = JournalStore(tmp_path, FakeClock())
    store.write([frame(1, T0, 1.0)])
    store.close()
    opened = open_read_only(tmp_path / "journal.sqlite3")
    try:
        assert opened.copy is None
        assert opened.conn.execute("SELECT COUNT(*) FROM frames").fetchone() == (1,)
    finally:
        opened.close()


@pytest.mark.parametrize("unreadable", ["state directory", "journal file"])
def test_a_journal_this_user_may_not_read_is_said_to_be_so(tmp_path: Path, unreadable: str) -> None:
    state = tmp_path / "state"
    store = JournalStore(state, FakeClock())
    store.write([frame(1, T0, 1.0)])
    store.close()
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv: permission bits do not stop root")
        prefix = WITHOUT_DAC
    script = """if True:
        import sys
        from rigmon.agent.journal import JournalError, JournalReader
        from rigmon.snapshot.pull import read_journal
        try:
            JournalReader(sys.argv[1])
        except JournalError as exc:
            print("reader:", exc)
        print("snapshot:", read_journal(sys.argv[1], 3600).error)
    """
    target = state if unreadable == "state directory" else state / "journal.sqlite3"
    target.chmod(0)
    try:
        proc = subprocess.run([*prefix, sys.executable, "-c", script, str(state)], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO, timeout=60)
    finally:
        target.chmod(0o700)
    assert proc.returncode == 0, proc.stderr
    journal = state / "journal.sqlite3"
    assert f"reader: cannot read journal {journal}: permission denied" in proc.stdout
    assert f"snapshot: cannot read journal {journal}: permission denied" in proc.stdout
    assert "no journal" not in proc.stdout
