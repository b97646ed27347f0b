"""Fault matrix, the journal's disk fills up: the agent runs with a file-size limit
(RLIMIT_FSIZE, SIGXFSZ ignored: writes fail with EFBIG as on a full disk). It keeps sampling
and serving, reports the journal failing, keeps what was already committed, and records again
on its own once there is room. The in-process variant (SQLite's page cap) is in
tests/agent/test_journal_writer_failures.py."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import httpx

from rigmon.agent.journal import DICT_CACHE_ENTRIES, DICT_ROTATE_S, JournalStore
from rigmon.schema import Frame, History, decode
from rigmon.sim.tree import write_tree
from tests.agent.journal_frames import T0, FakeClock, frame

REPO = Path(__file__).resolve().parents[2]
LIMIT_BYTES = 256 * 1024
T = TypeVar("T")


def _limited() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT_BYTES, resource.RLIM_INFINITY))


def wait_for(get: Callable[[], T | None], timeout_s: float = 30.0) -> T:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            frame = get()
        except httpx.HTTPError:
            frame = None
        if frame is not None:
            return frame
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_full_disk_is_reported_survived_and_recovered(tmp_path: Path) -> None:
    write_tree(tmp_path / "root", {"/proc/stat": "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"})
    (tmp_path / "agent.toml").write_text("[agent]\ninterval_s = 0.02\n[journal]\ncommit_interval_s = 0.05\n")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "rigmon", "agent", "--config", str(tmp_path / "agent.toml"), "--root",
         str(tmp_path / "root"), "--state-dir", str(tmp_path / "state"), "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)},
        preexec_fn=_limited)
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)

    def latest_if(condition: Callable[[Frame], bool]) -> Frame | None:
        response = http.get("/v1/latest")
        frame = decode(Frame, response.content) if response.status_code == 200 else None
        return frame if frame is not None and condition(frame) else None

    try:
        ok = wait_for(lambda: latest_if(lambda f: f.collectors["journal"].state == "ok"))
        full = wait_for(lambda: latest_if(lambda f: f.collectors["journal"].state == "error"))
        error = full.collectors["journal"].error or ""
        assert "full" in error or "too large" in error or "I/O" in error, error
        # Sampling and serving go on while nothing can be recorded.
        later = wait_for(lambda: latest_if(lambda f: f.seq > full.seq + 20))
        assert later.collectors["host"].ok
        history = decode(History, http.get("/v1/history", params={"from": repr(ok.taken_at - 60), "frames": "1"}).content)
        kept = [f.seq for f in history.frames]
        assert kept and min(kept) <= ok.seq  # what was committed before is still there
        # Room again: the journal notices by itself.
        resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        recovered = wait_for(lambda: latest_if(lambda f: f.collectors["journal"].state == "ok" and f.seq > later.seq))
        # The recovery is told in the frame after the one the journal's state came back in (the writer
        # reports it after its first commit again): wait for it rather than read the page at once.
        def event_kinds() -> list[str] | None:
            page = http.get("/v1/samples", params={"since": "0"}).json()
            kinds = [e["kind"] for f in page["frames"] for e in f["events"]]
            return kinds if "journal_recovered" in kinds else None

        kinds = wait_for(event_kinds)
        assert kinds.count("journal_failed") == 1 and kinds.count("journal_recovered") == 1
        # Both reach the journal too: the failure (its frame was lost) with the first frames
        # written again, the recovery in the frame after, saying how many frames were lost.
        def journaled_events() -> History | None:
            history = decode(History, http.get("/v1/history", params={"from": repr(ok.taken_at - 60)}).content)
            return history if any(e.kind == "journal_recovered" for e in history.events) else None
        events = wait_for(journaled_events).events
        assert [e.kind for e in events].count("journal_failed") == 1
        [back] = [e for e in events if e.kind == "journal_recovered"]
        lost = back.data["frames_not_written"]
        assert isinstance(lost, int) and lost > 20 and f"{lost} frames not recorded" in back.message
        after = decode(History, http.get("/v1/history", params={"from": repr(recovered.taken_at - 1),
                                                                "frames": "1"}).content)
        assert any(f.seq >= recovered.seq - 5 for f in after.frames)
    finally:
        http.close()
        proc.terminate()
        proc.wait(10)
    assert proc.returncode == 0


def test_reader_keeps_a_bounded_number_of_dictionaries(tmp_path: Path) -> None:
    """Found by benchmarks/soak.py: every rotated compression dictionary stayed cached.

    Format 3 writes no dictionaries; rows of format 2 (each frame compressed against a preset
    dictionary, a new one every `DICT_ROTATE_S`) are put in as an agent of that format wrote them.
    """
    import zlib

    from rigmon.agent.frame_json import frame_json
    from rigmon.agent.journal.blocks import compress

    clock = FakeClock()
    store = JournalStore(tmp_path / "journal.sqlite3", clock)
    try:
        frames = [frame(i + 1, T0 + i * DICT_ROTATE_S / 2, float(i)) for i in range(4 * DICT_CACHE_ENTRIES)]
        with store.conn:
            store.conn.execute("BEGIN IMMEDIATE")
            for n, f in enumerate(frames):
                raw = frame_json(f)
                if n % 2 == 0:
                    zdict = raw[-32 * 1024:]
                    dict_id = store.conn.execute("INSERT INTO dicts(body) VALUES (?)",
                                                 (zlib.compress(zdict, 9),)).lastrowid
                store.conn.execute("INSERT INTO frames(taken_at, run_id, seq, dict_id, body) VALUES (?, ?, ?, ?, ?)",
                                   (f.taken_at, f.run_id, f.seq, dict_id, compress(raw, zdict)))
        assert store.frames(T0, frames[-1].taken_at) == frames
        assert 0 < len(store._dicts) <= DICT_CACHE_ENTRIES
        clock.t = frames[-1].taken_at + 3600
        store.maintain()
        assert len(store.frames(T0, frames[-1].taken_at)) == len(frames)
        assert store.conn.execute("SELECT COUNT(*) FROM frames").fetchone()[0] == 0
        assert store.conn.execute("SELECT COUNT(*) FROM dicts").fetchone()[0] == 0
    finally:
        store.close()
