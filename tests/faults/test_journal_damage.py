"""Fault matrix, a damaged journal (issue 15, item 5): cut, bad header, bad pages, a directory in
its place, not writable. The agent sets it aside (kept, renamed with a timestamp), says so in an
event, records into a new journal (a new incident lands there), and /v1/history never answers 500."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from rigmon.agent.api import ApiState, build_app
from rigmon.agent.buffer import FrameBuffer
from rigmon.agent.journal import JournalStore
from rigmon.schema import SCHEMA_VERSION, CollectorStatus, History, Info, decode
from rigmon.sim.tree import write_tree
from tests.agent.journal_frames import T0, FakeClock, frame
from tests.faults.harness import WAIT_S, agent_config, only, running_agent

PAGE = 4096
INFO = Info(schema=SCHEMA_VERSION, node="n1", run_id="run2", agent_version="0", agent_start=T0, interval_s=1.0,
            collectors=(), kernel="6.8.0", buffer_frames=10, alarm_rules=())
KMSG_BOOT = "6,1,1000000,-;Linux version 6.8.0\n"
GPU = {f"/sys/bus/pci/devices/0000:1a:00.0/{name}": value for name, value in (("vendor", "0x10de\n"),
                                                                            ("class", "0x030200\n"))}
XID_79 = "4,2,2000,-;NVRM: Xid (PCI:0000:1a:00): 79, pid=1, name=python, GPU has fallen off the bus.\n"


def old_journal(path: Path) -> None:
    """A journal of an earlier run, several pages long, closed cleanly."""
    store = JournalStore(path, FakeClock())
    store.write([frame(i + 1, T0 + i, float(i % 100)) for i in range(400)])
    store.close()


def cut(path: Path) -> None:
    old_journal(path)
    os.truncate(path, path.stat().st_size // 3)


def bad_header(path: Path) -> None:
    old_journal(path)
    with open(path, "r+b") as fh:
        fh.write(b"not SQLite at all, sorry")


def bad_pages(path: Path) -> None:
    old_journal(path)
    size = path.stat().st_size
    rng = random.Random(15)
    with open(path, "r+b") as fh:
        # The schema and meta pages stay: the file opens, and the frames' pages are garbage.
        start = size // PAGE // 2 * PAGE
        fh.seek(start)
        fh.write(bytes(rng.randrange(256) for _ in range(size - start)))


def directory(path: Path) -> None:
    path.mkdir(parents=True)
    (path / "something").write_text("left here by hand")


def read_only(path: Path) -> None:
    old_journal(path)
    path.chmod(0o444)


VARIANTS: dict[str, Callable[[Path], None]] = {
    "cut": cut, "bad-header": bad_header, "bad-pages": bad_pages, "directory": directory, "read-only": read_only,
}


@pytest.mark.parametrize("variant", list(VARIANTS))
async def test_a_damaged_journal_is_set_aside_and_recording_goes_on(tmp_path: Path, variant: str) -> None:
    state = tmp_path / "state"
    journal = state / "journal.sqlite3"
    journal.parent.mkdir()
    VARIANTS[variant](journal)
    # Root may write a file whatever its mode: for root a read-only file is not damage.
    expect_set_aside = not (variant == "read-only" and os.geteuid() == 0)
    root = tmp_path / "root"
    write_tree(root, {"/dev/kmsg": KMSG_BOOT, "/proc/uptime": "100.00 50.00\n", **GPU})
    config = agent_config(root, {"collectors": only("kernel_log"), "agent": {"state_dir": str(state)},
                                 "journal": {"commit_interval_s": 0.05}})
    async with running_agent(config) as h:
        await h.wait_for(lambda f: f.collectors["journal"].state == "ok", "the journal recording")
        # A new incident after the damage: a GPU falls off the bus.
        with open(root / "dev/kmsg", "a") as fh:
            fh.write(XID_79)
        await h.wait_for(lambda f: any(e.kind == "xid" for e in f.events), "Xid 79")
        deadline = time.monotonic() + WAIT_S
        while True:
            r = await h.http.get("/v1/history", params={"from": "0", "to": repr(time.time() + 60)})
            # Never a 500 with a traceback: the answer is the documented JSON.
            assert r.status_code in (200, 503), r.text
            if r.status_code == 200 and any(e.kind == "xid" for e in decode(History, r.content).events):
                break
            assert time.monotonic() < deadline, f"the new incident was never journaled: {r.status_code} {r.text}"
            await h.http.get("/healthz")
            time.sleep(0.05)
        events = decode(History, r.content).events
    kept = sorted(state.glob("journal.sqlite3.damaged-*"))
    set_aside = [e for e in h.events("journal_set_aside")]
    if not expect_set_aside:
        assert not kept and not set_aside
        return
    assert [p.name for p in kept if not p.name.endswith(("-wal", "-shm"))] == [kept[0].name]
    assert len(set_aside) == 1 and set_aside[0].severity == "warning"
    assert set_aside[0].data["kept_as"] == str(kept[0]) and "new journal" in set_aside[0].message
    # The damaged journal is kept as it was, for forensics.
    if variant == "directory":
        assert (kept[0] / "something").read_text() == "left here by hand"
    # The event is in the new journal too, and no unclean shutdown is made up.
    assert any(e.kind == "journal_set_aside" for e in events)
    assert not h.events("unclean_shutdown")
    assert journal.is_file()


@pytest.mark.parametrize("variant", ["cut", "bad-pages"])
async def test_history_of_a_journal_damaged_under_the_reader_is_503_not_500(tmp_path: Path, variant: str) -> None:
    # The writer sets a damaged journal aside when it meets it; a reader can meet it first.
    journal = tmp_path / "journal.sqlite3"
    VARIANTS[variant](journal)
    state = ApiState(buffer=FrameBuffer(10), info=lambda: INFO, token=None, max_streams=1, max_request_bytes=65536,
                     journal_path=journal, journal_status=lambda: CollectorStatus(state="ok", ok=True),
                     now=lambda: T0 + 600)
    transport = httpx.ASGITransport(app=build_app(state), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
        for params in ({"from": repr(T0 - 1)}, {"from": repr(T0 - 1), "frames": "1"}):
            for accept in ("application/json", "application/x-ndjson", "application/gzip"):
                r = await client.get("/v1/history", params=params, headers={"accept": accept})
                assert r.status_code == 503, (params, accept, r.text)
                assert r.headers["content-type"] == "application/json"
                assert "journal" in r.json()["error"] and "Traceback" not in r.text
                # The file named, not a library's bare message ("file is not a database").
                assert str(journal) in r.json()["error"], r.json()["error"]
