"""``rigmon snapshot --journal`` of journals that are not in their best shape: on a read-only file
system, damaged (cut short, bad pages), of a newer format, set aside by the agent."""

from __future__ import annotations

import json
import os
import random
import resource
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from rigmon.agent.journal import JournalStore
from rigmon.agent.journal.damage import set_aside
from rigmon.snapshot.bundle import read_bundle
from rigmon.snapshot.journal_part import read_journal
from tests.agent.journal_frames import T0, FakeClock, frame

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


def test_a_journal_in_a_directory_this_user_may_read_but_not_write_is_read(tmp_path: Path) -> None:
    """The agent's state directory (mode 750) read by a member of its group after a clean stop (no -wal,
    no -shm): SQLite cannot create the -shm there and said 'attempt to write a readonly database'
    (SQLITE_READONLY_DIRECTORY, not the CANTOPEN of a read-only mount); nothing could be pulled, exit 3."""
    from tests.agent.test_journal_read_only import WITHOUT_DAC

    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv: permission bits do not stop root")
        prefix = WITHOUT_DAC
    state = tmp_path / "state"
    store = JournalStore(state, FakeClock())
    store.write([frame(i + 1, T0 + i, 11.9 - i / 1000) for i in range(30)])
    store.close()
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (state / "journal.sqlite3").chmod(0o444)
    state.chmod(0o555)
    try:
        proc = subprocess.run([*prefix, *snapshot_cmd(state, out_dir / "snap.tar.gz")], capture_output=True,
                              text=True, env=ENV, cwd=REPO, timeout=60)
    finally:
        state.chmod(0o755)
    assert proc.returncode == 0, proc.stderr
    (node,) = read_bundle(out_dir / "snap.tar.gz").nodes
    assert [f.seq for f in node.frames] == list(range(1, 31))
    assert sorted(p.name for p in state.iterdir()) == ["journal.sqlite3"]


def recorded(path: Path, n: int = 1000) -> dict[int, bytes]:
    """A journal of ``n`` frames of one crashed run: most in blocks of 50, the newest in streams.

    Returns each frame's wire JSON by seq.
    """
    clock = FakeClock()
    store = JournalStore(path, clock, block_frames=50)
    store.begin_run("run1", "n1", T0)
    for start in range(0, n, 100):
        store.write([frame(i + 1, T0 + i, float(i % 37)) for i in range(start, min(n, start + 100))])
    clock.t = T0 + n
    store.compact()
    frames = {int(json.loads(raw)["seq"]): raw for raw in store.frames_json(T0, T0 + n)}
    store.close()
    assert len(frames) == n
    return frames


def leaf_pages(path: Path, table: str) -> list[int]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno",
                            (table,)).fetchall()
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no dbstat table to find a table's pages")
    finally:
        conn.close()
    return [r[0] for r in rows]


def cut(path: Path) -> None:
    os.truncate(path, path.stat().st_size * 2 // 3)


def bad_pages(path: Path) -> None:
    # A page in the middle of the blocks and the first page of recent frames (the stream before the
    # newest one) overwritten.
    blocks = leaf_pages(path, "blocks")
    pages = [blocks[len(blocks) // 2], leaf_pages(path, "frames")[0]]
    rng = random.Random(7)
    with open(path, "r+b") as fh:
        for page in pages:
            fh.seek((page - 1) * 4096)
            fh.write(bytes(rng.randrange(256) for _ in range(4096)))


@pytest.mark.parametrize("damage", [cut, bad_pages], ids=["cut", "bad-pages"])
def test_a_damaged_journal_gives_what_can_still_be_read(tmp_path: Path, damage: Callable[[Path], None]) -> None:
    journal = tmp_path / "journal.sqlite3"
    frames = recorded(journal)
    damage(journal)
    part = read_journal(tmp_path, 3600)
    got = part.frame_lines()
    # Never a traceback, nor an empty bundle: what is readable comes out, exactly as recorded.
    assert got and len(got) < len(frames)
    assert all(raw == frames[json.loads(raw)["seq"]] for raw in got)
    assert [json.loads(raw)["seq"] for raw in got] == sorted(json.loads(raw)["seq"] for raw in got)
    assert part.frame_count == len(got) and part.node == "n1" and part.history is not None
    assert part.error is not None and "damaged" in part.error and "could not be read" in part.error
    if damage is bad_pages:
        # The pages after the damage are read: the newest frames (the incident) are there.
        assert json.loads(got[-1])["seq"] == len(frames)
        assert part.latest is not None and part.latest.seq == len(frames)


@pytest.mark.slow
def test_snapshot_of_a_damaged_journal_is_written_and_says_so(tmp_path: Path) -> None:
    recorded(tmp_path / "state" / "journal.sqlite3")
    bad_pages(tmp_path / "state" / "journal.sqlite3")
    out = tmp_path / "snap.tar.gz"
    proc = subprocess.run(snapshot_cmd(tmp_path / "state", out), capture_output=True, text=True, env=ENV, cwd=REPO,
                          timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "journal is damaged" in proc.stderr
    bundle = read_bundle(out)
    assert bundle.nodes[0].frames and "journal is damaged" in bundle.manifest["nodes"][0]["error"]
    # Salvage leaves nothing behind.
    assert not list(Path(tempfile.gettempdir()).glob("rigmon-salvage-*"))


def test_a_journal_the_agent_set_aside_can_be_given_to_snapshot(tmp_path: Path) -> None:
    # The agent renames a journal it cannot use to journal.sqlite3.damaged-<time> (with its WAL)
    # and starts a new one: the incident before is in the old file.
    frames = recorded(tmp_path / "journal.sqlite3", 200)
    kept = set_aside(tmp_path / "journal.sqlite3", T0)
    assert kept.name.startswith("journal.sqlite3.damaged-")
    part = read_journal(kept, 3600)
    assert part.error is None, part.error
    assert part.frame_lines() == [frames[seq] for seq in sorted(frames)]
    assert not any("set aside" in e for e in part.capture_errors)  # not itself
    # The new journal's bundle points at it.
    recorded(tmp_path / "journal.sqlite3", 10)
    part = read_journal(tmp_path, 3600)
    assert any(kept.name in e and "set aside" in e for e in part.capture_errors)


def test_a_journal_of_a_newer_format_is_read_and_the_bundle_says_so(tmp_path: Path) -> None:
    frames = recorded(tmp_path / "journal.sqlite3", 100)
    conn = sqlite3.connect(tmp_path / "journal.sqlite3")
    with conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'format'")
    conn.close()
    part = read_journal(tmp_path, 3600)
    assert part.frame_count == len(frames)
    assert any("format 99, newer than this rigmon" in e for e in part.capture_errors)


@pytest.mark.slow
def test_an_agent_whose_state_directory_is_read_only_says_so_and_reads_its_journal(tmp_path: Path) -> None:
    # Neither "damaged" nor "not readable and writable", nor a try to set it aside every 10 s.
    recorded(tmp_path / "state" / "journal.sqlite3", 100)
    script = """if True:
        import logging, sys, threading
        from rigmon.agent.journal import JournalReader, JournalWriter
        from rigmon.clock import SystemClock
        from rigmon.config import JournalSection
        logging.basicConfig(level=logging.WARNING)
        failed = threading.Event()
        errors = []
        writer = JournalWriter(sys.argv[1], SystemClock(), JournalSection(), "run2", "n1", 1.0)
        writer.start(lambda kind, sev, subject, message, data: (errors.append(message), failed.set()))
        assert failed.wait(10)
        print("status:", writer.status.error)
        print("events:", errors)
        with JournalReader(sys.argv[1]) as reader:
            print("frames:", reader.count_frames(0, 2e9))
    """
    proc = run_in_read_only_dir(tmp_path / "state", [sys.executable, "-c", script, str(tmp_path / "state")])
    assert proc.returncode == 0, proc.stderr
    assert "status: journal " in proc.stdout and "read-only file system" in proc.stdout
    assert "frames: 100" in proc.stdout
    assert "set aside" not in proc.stderr and "damaged" not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_a_bundle_that_cannot_be_written_is_an_error_and_leaves_nothing(tmp_path: Path) -> None:
    recorded(tmp_path / "state" / "journal.sqlite3", 3000)  # a bundle of ~90 kB
    out_dir = tmp_path / "out"
    out_dir.mkdir()

    def small_disk() -> None:
        # A full disk, hermetically: writes past 64 kB fail (EFBIG; Python ignores SIGXFSZ). The
        # journal's WAL index (32 kB) can still be made.
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))

    proc = subprocess.run(snapshot_cmd(tmp_path / "state", out_dir / "bug.tar.gz"), capture_output=True, text=True,
                          env=ENV, cwd=REPO, timeout=60, preexec_fn=small_disk)
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr and "cannot write" in proc.stderr and "no bundle written" in proc.stderr
    # No cut bundle that looks like a bug report.
    assert list(out_dir.iterdir()) == []
    proc = subprocess.run(snapshot_cmd(tmp_path / "state", tmp_path / "missing" / "bug.tar.gz"), capture_output=True,
                          text=True, env=ENV, cwd=REPO, timeout=60)
    assert proc.returncode == 2 and "is not a directory" in proc.stderr and "Traceback" not in proc.stderr


def test_a_block_whose_bytes_went_bad_is_left_out_of_the_bundle_and_said(tmp_path: Path) -> None:
    frames = recorded(tmp_path / "journal.sqlite3", 1000)
    conn = sqlite3.connect(tmp_path / "journal.sqlite3")
    body = bytearray(conn.execute("SELECT body FROM blocks WHERE first_seq = 101").fetchone()[0])
    body[len(body) // 2:len(body) // 2 + 16] = bytes(16)
    with conn:
        conn.execute("UPDATE blocks SET body = ? WHERE first_seq = 101", (bytes(body),))
    conn.close()
    part = read_journal(tmp_path, 3600)
    # The bundle's frames decompress (zcat, a replay), without frames 101-150, and the error says so.
    assert [json.loads(raw)["seq"] for raw in part.frame_lines()] == [*range(1, 101), *range(151, 1001)]
    assert part.error is not None and "left out" in part.error and "a block of 50 frames" in part.error
    assert len(frames) == 1000
