"""A real snapshot of a simulated node whose GPU 3 fell off the bus, on an accelerated clock: inventory.json keeps
the lost GPU's facts (from the newest frame that read them, and says which), REPORT.md's "per point" is the
frames' own spacing (simulated seconds), and its charts start at the agent's first frame, not at the window's start.
"""

from __future__ import annotations

import asyncio
import io
import re
import time
from pathlib import Path

import pytest

from rigmon.agent.journal import JournalError, JournalReader
from rigmon.sim.rig import running_rig
from rigmon.snapshot.bundle import Bundle, read_bundle
from rigmon.snapshot.command import take_snapshot

#: Simulated seconds per real second, and real seconds between the agent's frames: frames 1 simulated s apart.
SPEED = 4
INTERVAL_S = 0.25
#: The snapshot's window: far longer than the agent has run, and short enough for the agent to answer it in
#: frames (at most 1500 of its configured interval), not in buckets.
WINDOW_S = 300.0


async def snapshot_after_the_loss(workdir: Path) -> Path:
    """Run the undervolt scenario's node until its journal holds a few frames after GPU 3 was lost, then take a
    snapshot of its agent as ``rigmon snapshot URL`` does; returns the bundle."""
    state = workdir / "state" / "node01"
    async with running_rig("undervolt-bus-drop", 1, base_port=0, speed=SPEED, workdir=workdir,
                           interval_s=INTERVAL_S) as rr:
        for _ in range(3000):
            if (state / "journal.sqlite3").exists():
                try:
                    with JournalReader(state) as reader:
                        lost = [e.at for e in reader.events(0.0, float("inf")) if e.kind == "gpu_lost"]
                        frames = reader.frames_json(lost[0], float("inf"), limit=10) if lost else []
                except JournalError:
                    # The file exists before the agent has created its tables.
                    frames = []
                if len(frames) > 3:
                    break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the agent never journaled frames after the GPU was lost")
        path, _ = await asyncio.to_thread(take_snapshot, rr.urls, [], WINDOW_S, workdir / "bug.tar.gz", None,
                                          io.StringIO())
    return path


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    return read_bundle(asyncio.run(snapshot_after_the_loss(tmp_path_factory.mktemp("sim"))))


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + " UTC"


def test_the_inventory_keeps_a_lost_gpus_facts_from_the_newest_frame_that_read_them(bundle: Bundle) -> None:
    (node,) = bundle.nodes
    latest = node.frames[-1]
    (lost,) = [g for g in latest.readings.gpus if g.state == "lost"]
    assert lost.pcie_width_max is None and lost.clock_max_sm_mhz is None  # what the latest frame holds of it
    # The newest frame that read GPU 3 in full: the one before it was lost.
    read = [(f, g) for f in node.frames for g in f.readings.gpus if g.uuid == lost.uuid and g.state != "lost"]
    frame, gpu = read[-1]
    inventory = node.inventory
    (listed,) = [g for g in inventory["readings"]["gpus"] if g["uuid"] == lost.uuid]
    assert gpu.pcie_width_max == 16
    assert (listed["serial"], listed["pcie_width_max"], listed["pcie_gen_max"]) == (gpu.serial, 16, gpu.pcie_gen_max)
    assert (listed["clock_max_sm_mhz"], listed["clock_max_mem_mhz"]) == (gpu.clock_max_sm_mhz, gpu.clock_max_mem_mhz)
    assert listed["mem_total_bytes"] == gpu.mem_total_bytes and listed["mem_total_bytes"]
    # Said to come from that frame, not from the latest one the inventory is dated by.
    assert listed["facts_from"] == {"taken_at": frame.taken_at, "run_id": frame.run_id, "seq": frame.seq}
    assert inventory["taken_at"] >= latest.taken_at > frame.taken_at
    # The GPUs still on the bus are the latest frame's, said by nothing more.
    others = [g for g in inventory["readings"]["gpus"] if g["uuid"] != lost.uuid]
    assert len(others) == 3 and all("facts_from" not in g for g in others)
    assert all(g["pcie_width_max"] == 16 for g in others)


def test_the_report_says_the_frames_own_spacing_per_point(bundle: Bundle) -> None:
    # The agent ticks every 0.25 s of real time, its clock (the simulator's) runs 4 times as fast: its frames
    # are 1 simulated second apart (closer where a pushed reading, an Xid, added one), as their times say.
    (node,) = bundle.nodes
    gaps = sorted(b.taken_at - a.taken_at for a, b in zip(node.frames, node.frames[1:]))
    said = re.search(r"^Series from the `frames` tier \(([0-9.]+) s per point\)\.$", bundle.report, re.MULTILINE)
    assert said is not None, bundle.report
    # Their usual spacing (the median gap, to two digits), not the configured interval in real seconds.
    assert float(said.group(1)) == pytest.approx(gaps[len(gaps) // 2], rel=0.06)
    assert float(said.group(1)) > 2 * INTERVAL_S


def test_the_charts_start_at_the_agents_first_frame_not_at_the_window_start(bundle: Bundle) -> None:
    (node,) = bundle.nodes
    first = node.frames[0]
    assert first.taken_at - bundle.manifest["nodes"][0]["from_at"] > 200  # the agent ran for far less than the window
    labels = [line.strip() for line in bundle.report.splitlines() if line.strip().startswith("minutes after")]
    assert labels and all(label == f"minutes after {_stamp(first.taken_at)}" for label in labels), labels
    # And the empty part of the window is said, with its cause: the agent had not started.
    assert (f"the agent started at {_stamp(first.agent_start)}") in bundle.report
