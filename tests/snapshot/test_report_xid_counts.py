"""REPORT.md counts one Xid once in its tables, as it lists it: the agent reports it from NVML's event set and
from the kernel log, and both reports stay in the bundle's events.jsonl (and the manifest's count)."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import pytest

from rigmon.agent.journal import JournalError, JournalReader
from rigmon.sim.rig import running_rig
from rigmon.snapshot.bundle import Bundle, read_bundle
from rigmon.snapshot.command import take_snapshot


async def snapshot_of_the_xid(workdir: Path) -> Path:
    """Run the undervolt scenario's node until its journal holds GPU 3's Xid 79 from both NVML and the kernel
    log and a frame after them, then take a snapshot of its agent as ``rigmon snapshot URL`` does; returns the bundle."""
    state = workdir / "state" / "node01"
    async with running_rig("undervolt-bus-drop", 1, base_port=0, speed=4, workdir=workdir, interval_s=0.25) as rr:
        for _ in range(3000):
            if (state / "journal.sqlite3").exists():
                try:
                    with JournalReader(state) as reader:
                        xids = [e for e in reader.events(0.0, float("inf")) if e.kind == "xid"]
                        # A frame at or after both: the window ends at the latest frame, and an event's own time
                        # can be later than the frame carrying it (a kernel log line's by up to a quarter second).
                        after = reader.frames_json(max(e.at for e in xids), float("inf"), limit=1) if xids else []
                except JournalError:
                    # The file exists before the agent has created its tables.
                    xids, after = [], []
                if {e.data.get("source") for e in xids} >= {"nvml", "kmsg"} and after:
                    break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the agent never journaled the Xid from both sources")
        path, _ = await asyncio.to_thread(take_snapshot, rr.urls, [], 600.0, workdir / "bug.tar.gz", None,
                                          io.StringIO())
    return path


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    return read_bundle(asyncio.run(snapshot_of_the_xid(tmp_path_factory.mktemp("sim"))))


def test_the_event_table_counts_an_xid_of_nvml_and_the_kernel_log_once(bundle: Bundle) -> None:
    (node,) = bundle.nodes
    xids = [e for e in node.events if e.kind == "xid"]
    # events.jsonl keeps both reports, deliberately.
    assert sorted(str(e.data["source"]) for e in xids) == ["kmsg", "nvml"]
    (row,) = [line for line in bundle.report.splitlines() if line.startswith("| xid |")]
    assert row == "| xid | critical | 1 |"
    assert ("`xid`: an Xid reported by both NVML and the kernel log (a kernel-log + NVML pair) counts as one "
            "(1 Xid, 2 reports in events.jsonl).") in bundle.report


def test_the_node_table_counts_an_xid_of_nvml_and_the_kernel_log_once(bundle: Bundle) -> None:
    (node,) = bundle.nodes
    (entry,) = bundle.manifest["nodes"]
    assert entry["events"] == len(node.events)
    (row,) = [line for line in bundle.report.splitlines() if line.startswith("| node01 |")]
    counted = re.search(r"\| (\d+) \((\d+)/(\d+)\) \|", row)
    assert counted is not None, row
    total, warnings, criticals = map(int, counted.groups())
    assert total == len(node.events) - 1
    assert criticals == sum(e.severity == "critical" for e in node.events) - 1
    assert warnings == sum(e.severity == "warning" for e in node.events)
    assert "Events: an Xid reported by both NVML and the kernel log (a kernel-log + NVML pair) counts as one; " \
           "events.jsonl and the manifest count both reports." in bundle.report
