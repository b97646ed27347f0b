"""/proc/mdstat gone while the agent runs (md unloaded, a container that lost /proc): the raid collector fails
saying the md status is unreadable, with the arrays it had read listed as last read and their state unknown,
not a quiet "absent" that drops them from the frames as if there had never been any; back, they read again."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from rigmon.clock import SystemClock
from rigmon.collectors.base import CollectorError, EventDraft, NoData
from rigmon.collectors.raid import RaidCollector
from rigmon.hw.root import HostRoot, read_scope
from rigmon.schema import RaidArrayReading
from rigmon.sim import write_tree
from rigmon.sim.node import SimNode
from rigmon.sim.scenarios.md_degraded import MdDegraded
from rigmon.sim.scenarios.model_load import find_storage
from rigmon.sim.tree import Tree
from rigmon.sim.udev import FakeUdevSource
from tests.collectors.test_host import FakeClock


class MdNode:
    """The `md-degraded` scenario's node (md127, RAID1 of two NVMe) read by the real raid collector a
    simulated second at a time, in one read scope as the agent does."""

    def __init__(self, tmp_path: Path) -> None:
        self.tree = Tree(tmp_path)
        self.sim = SimNode(name="n", tree=self.tree, rng=random.Random(1))
        MdDegraded().build(self.sim, 0)
        self.clock = FakeClock()
        self.raid = RaidCollector(HostRoot(tmp_path), self.clock)
        self.t_s = 0.0

    def step(self) -> None:
        """One simulated second: the kernel's files written anew (/proc/mdstat among them)."""
        self.t_s += 1.0
        self.clock.now += 1.0
        self.sim.step(self.t_s)

    def collect(self) -> list[object]:
        with read_scope():
            return list(self.raid.collect())

    def fail_member(self) -> None:
        find_storage(self.sim).array("md127").members[1].state = "faulty"


def _arrays(records: list[object]) -> dict[str, RaidArrayReading]:
    return {r.name: r for r in records if isinstance(r, RaidArrayReading)}


def test_mdstat_gone_keeps_the_arrays_as_last_read_with_their_state_unknown_and_says_why(tmp_path: Path) -> None:
    node = MdNode(tmp_path)
    node.fail_member()
    node.step()
    node.collect()
    node.step()
    before = _arrays(node.collect())["md127"]
    assert (before.health, before.mdstat_state, before.working_disks) == ("degraded", "active", 1)
    assert before.read_bytes_per_s is not None
    node.tree.remove("/proc/mdstat")
    for _ in range(2):  # as long as it is gone
        with pytest.raises(CollectorError) as failed:
            node.collect()
        assert str(failed.value) == ("md status unreadable: /proc/mdstat is gone (md driver unloaded, or /proc no "
                                     "longer mounted where the agent runs); the 1 array last read (md127) listed "
                                     "with their state unknown")
        (kept,) = failed.value.records
        assert isinstance(kept, RaidArrayReading)
        # What it is stays: name, /dev/md name, level, geometry, identity, members by name and number.
        assert (kept.name, kept.md_name, kept.level, kept.raid_disks, kept.uuid, kept.size_bytes) == (
            before.name, before.md_name, before.level, before.raid_disks, before.uuid, before.size_bytes)
        assert [(m.name, m.slot, m.device) for m in kept.members] == [(m.name, m.slot, m.device) for m in before.members]
        # Its health unknown, the one last read beside it (not taken for now's); nothing of now.
        assert (kept.health, kept.health_last_read) == ("unknown", "degraded")
        assert (kept.mdstat_state, kept.array_state, kept.working_disks, kept.degraded) == ("unknown", None, None, None)
        assert (kept.read_bytes_per_s, kept.write_bytes_per_s, kept.sync_action, kept.member_imbalance_pct) == (
            None, None, None, None)
        assert {(m.role, m.read_bytes_per_s, m.errors_total, m.flags) for m in kept.members} == {
            ("unknown", None, None, ())}


def test_mdstat_back_reads_the_arrays_again_and_says_only_what_changed_meanwhile(tmp_path: Path) -> None:
    node = MdNode(tmp_path)
    node.step()
    node.collect()
    node.tree.remove("/proc/mdstat")
    with pytest.raises(CollectorError):
        node.collect()
    # Back, the same array: no "appeared" (nor "disappeared") for an array that was there all along.
    node.step()
    back = node.collect()
    assert _arrays(back)["md127"].health == "ok" and _arrays(back)["md127"].mdstat_state == "active"
    assert not [r for r in back if isinstance(r, EventDraft)]
    # A member that failed while md could not be read is said when it is back, against the last reading.
    node.tree.remove("/proc/mdstat")
    with pytest.raises(CollectorError):
        node.collect()
    node.fail_member()
    node.step()
    events = [(e.kind, e.data) for e in node.collect() if isinstance(e, EventDraft)]
    assert ("raid_health_changed", {"from": "ok", "to": "degraded", "array_state": "clean", "degraded": 1}) in events


def test_no_mdstat_on_a_machine_that_never_listed_an_array_is_still_a_quiet_absence(tmp_path: Path) -> None:
    write_tree(tmp_path, {"/proc/diskstats": ""})
    with pytest.raises(NoData, match=r"^no /proc/mdstat \(md driver not loaded\)$"):
        RaidCollector(HostRoot(tmp_path), FakeClock()).collect()


def test_an_mdstat_there_but_unreadable_is_an_error_not_an_absence(tmp_path: Path) -> None:
    # A directory where the file should be reads nothing, as a refused read does.
    (tmp_path / "proc" / "mdstat").mkdir(parents=True)
    with pytest.raises(CollectorError, match=r"^md status unreadable: /proc/mdstat cannot be read$") as failed:
        RaidCollector(HostRoot(tmp_path), FakeClock()).collect()
    assert failed.value.records == ()


def test_all_arrays_stopped_then_md_unloaded_is_a_quiet_absence(tmp_path: Path) -> None:
    # mdadm --stop of every array, then modprobe -r: nothing was lost, md is just not there any more.
    node = MdNode(tmp_path)
    node.step()
    node.collect()
    find_storage(node.sim).stop("md127")
    node.step()
    assert [e.kind for e in node.collect() if isinstance(e, EventDraft)] == ["raid_array_removed"]
    node.tree.remove("/proc/mdstat")
    with pytest.raises(NoData):
        node.collect()


async def test_frames_keep_the_arrays_while_md_is_unreadable_and_say_it_once(tmp_path: Path) -> None:
    from tests.agent.sampler_helpers import frames_until, make

    node = MdNode(tmp_path)
    node.step()
    sampler, frames = make({"raid": RaidCollector(HostRoot(tmp_path), SystemClock())})
    task = asyncio.create_task(sampler.run())
    try:
        read = await frames_until(frames, lambda f: [a.name for a in f.readings.raid] == ["md127"])
        assert read.collectors["raid"].state == "ok"
        node.tree.remove("/proc/mdstat")
        failed = await frames_until(frames, lambda f: f.collectors["raid"].state == "error")
        assert "md status unreadable: /proc/mdstat is gone" in str(failed.collectors["raid"].error)
        later = await frames_until(frames, lambda f: f.seq > failed.seq + 3)
        # Still listed, as the array it is, in every frame while md cannot be read.
        assert [(a.name, a.mdstat_state) for a in later.readings.raid] == [("md127", "unknown")]
        node.step()  # written again
        back = await frames_until(frames, lambda f: f.collectors["raid"].state == "ok" and f.seq > later.seq)
        assert [(a.name, a.mdstat_state) for a in back.readings.raid] == [("md127", "active")]
    finally:
        sampler.stop()
        await task
    kinds = [(e.kind, e.subject) for f in frames for e in f.events if e.kind != "agent_started"]
    assert kinds == [("collector_failed", "collector:raid"), ("collector_recovered", "collector:raid")]
    assert all(f.readings.raid for f in frames if f.seq >= read.seq)  # never gone from a frame


@pytest.mark.parametrize("mdstat", [None, "md3 : invalid\n      314159265 blocks 64k chunks\n"])
def test_a_udev_event_while_md_is_unreadable_pushes_nothing_and_logs_no_traceback(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, mdstat: str | None) -> None:
    # Gone, or text that is not mdstat: the tick's own call says why; the re-read of an event that failed
    # the same way went up to the udev watcher, which logged it as a crash (a traceback per event).
    node = MdNode(tmp_path)
    node.step()
    source = FakeUdevSource()
    collector = RaidCollector(HostRoot(tmp_path), node.clock, events=source)
    collector.collect()
    pushed: list[Sequence[object]] = []
    got = threading.Event()

    def push(records: Sequence[object]) -> None:
        pushed.append(records)
        got.set()

    collector.start(push)
    try:
        if mdstat is None:
            node.tree.remove("/proc/mdstat")
        else:
            node.tree.write("/proc/mdstat", mdstat)
        source.inject("change", "/devices/virtual/block/md127", "block", "disk")
        assert got.wait(5)
    finally:
        collector.close()
    assert [list(records) for records in pushed] == [[]]
    assert not [r for r in caplog.records if r.exc_info]
