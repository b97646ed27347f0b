"""RAID collector: /proc/mdstat parsing for every array shape, member roles, health, balance, events."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.collectors.base import EventDraft
from rigmon.collectors.raid import (
    MemberFacts,
    MdstatMember,
    RaidCollector,
    imbalance_pct,
    member_role,
    parse_md_links,
    parse_mdstat,
    parse_sync_completed,
)
from rigmon.hw.root import HostRoot
from rigmon.schema import RaidArrayReading
from rigmon.sim import write_tree

RAID0 = """Personalities : [raid0] 
md127 : active raid0 nvme1n1[1] nvme0n1[0]
      3906764800 blocks super 1.2 512k chunks
      
unused devices: <none>
"""


def one(text: str) -> object:
    arrays = parse_mdstat(text)
    assert len(arrays) == 1
    return arrays[0]


def test_raid0_has_chunks_and_no_sync() -> None:
    a = parse_mdstat(RAID0)[0]
    assert (a.name, a.state, a.level, a.blocks_kib, a.metadata, a.chunk_kib) == (
        "md127", "active", "raid0", 3906764800, "1.2", 512)
    assert [(m.name, m.desc_nr) for m in a.members] == [("nvme1n1", 1), ("nvme0n1", 0)]
    assert a.sync_action is None and a.raid_disks is None


def test_recovery_progress_line() -> None:
    a = parse_mdstat(
        "md0 : active raid1 sdf1[2] sdg1[1](F) sdh1[0]\n"
        "      1953382400 blocks super 1.2 [2/1] [U_]\n"
        "      [==>..................]  recovery = 12.6% (246300416/1953382400) finish=137.1min speed=207456K/sec\n"
        "      bitmap: 3/15 pages [12KB], 65536KB chunk\n\n")[0]
    assert (a.raid_disks, a.working_disks, a.member_status) == (2, 1, "U_")
    assert (a.sync_action, a.sync_pct, a.sync_done_kib, a.sync_total_kib) == ("recover", 12.6, 246300416, 1953382400)
    assert (a.sync_finish_min, a.sync_speed_kib_per_s) == (137.1, 207456)
    assert [m.faulty for m in a.members] == [False, True, False]


@pytest.mark.parametrize(("word", "action"), [("resync", "resync"), ("check", "check"), ("reshape", "reshape")])
def test_other_sync_actions(word: str, action: str) -> None:
    a = parse_mdstat(
        "md1 : active raid5 sdd[3] sdc[2] sdb[1] sda[0]\n"
        "      5860147200 blocks super 1.2 level 5, 512k chunk, algorithm 2 [4/4] [UUUU]\n"
        f"      [>....................]  {word} =  0.4% (8401536/1953382400) finish=301.2min speed=107584K/sec\n\n")[0]
    assert (a.sync_action, a.sync_pct, a.chunk_kib) == (action, 0.4, 512)


def test_resync_delayed() -> None:
    a = parse_mdstat("md2 : active raid1 sdb3[1] sda3[0]\n      1000 blocks super 1.2 [2/2] [UU]\n"
                     "      \tresync=DELAYED\n      \n")[0]
    assert (a.sync_action, a.sync_pending, a.sync_pct) == ("resync", "DELAYED", None)


def test_inactive_array_has_no_personality() -> None:
    a = parse_mdstat("md127 : inactive nvme1n1[1](S) nvme0n1[0](S)\n      3906764800 blocks super 1.2\n       \n")[0]
    assert (a.state, a.level) == ("inactive", None)
    assert all(m.spare for m in a.members)


def test_member_flags_journal_write_mostly_replacement() -> None:
    a = parse_mdstat("md1 : active (auto-read-only) raid5 nvme0n1p1[4](J) sde[5](S) sdd[3](W) sdc[2](R) sdb[1]\n")[0]
    assert a.read_only == "auto-read-only"
    flags = {m.name: m for m in a.members}
    assert flags["nvme0n1p1"].journal and flags["sde"].spare
    assert flags["sdd"].write_mostly and flags["sdc"].replacement


def test_broken_raid0() -> None:
    a = parse_mdstat(RAID0.replace("active raid0", "broken raid0"))[0]
    assert (a.state, a.level) == ("broken", "raid0")


def test_several_arrays_and_unused_line() -> None:
    text = RAID0 + RAID0.replace("md127", "md126").replace("nvme1n1", "nvme3n1").replace("nvme0n1", "nvme2n1")
    assert [a.name for a in parse_mdstat(text)] == ["md127", "md126"]


def test_sync_completed() -> None:
    assert parse_sync_completed("492600832 / 3906764800") == (492600832, 3906764800)
    assert parse_sync_completed("none") is None
    assert parse_sync_completed("delayed") is None
    assert parse_sync_completed(None) is None


@pytest.mark.parametrize(("flags", "slot", "present", "ms", "role"), [
    (("in_sync",), 0, True, None, "in_sync"),
    (("spare",), 1, True, None, "rebuilding"),
    (("spare",), None, True, None, "spare"),
    (("faulty", "write_error"), None, True, None, "faulty"),
    (("journal",), None, True, None, "journal"),
    (("in_sync",), 0, False, None, "missing"),
    ((), 0, True, MdstatMember("sda", 0, faulty=True), "faulty"),
    ((), None, True, MdstatMember("sda", 3, spare=True), "spare"),
])
def test_member_roles(flags: tuple[str, ...], slot: int | None, present: bool, ms: MdstatMember | None,
                      role: str) -> None:
    assert member_role(MemberFacts("sda", ms, flags, slot, present)) == role


def test_imbalance() -> None:
    assert imbalance_pct([1.0e9, 0.5e9], 50e6) == 50.0
    assert imbalance_pct([1.0e9], 50e6) is None
    assert imbalance_pct([1e3, 0.0], 50e6) is None


def test_md_links() -> None:
    assert parse_md_links({"raid0n0": "../md127", "raid0n1": "../md126", "junk": None}) == {
        "md127": "raid0n0", "md126": "raid0n1"}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return 1_700_000_000.0 + self.now

    def monotonic(self) -> float:
        return self.now


def _strix_tree(tmp_path: Path, sectors: dict[str, int], state127: str = "clean") -> None:
    lines = ""
    for minor, name in enumerate(["nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1"]):
        lines += f" 259 {minor} {name} 100 0 {sectors[name]} 10 0 0 0 0 0 50 60 0 0 0 0 0 0\n"
    for number, members in ((127, "nvme0n1 nvme1n1"), (126, "nvme2n1 nvme3n1")):
        total = sum(sectors[m] for m in members.split())
        lines += f"   9 {number} md{number} 200 0 {total} 20 0 0 0 0 0 50 60 0 0 0 0 0 0\n"
    files = {
        "/proc/mdstat": RAID0 + RAID0.replace("md127", "md126").replace("nvme1n1", "nvme3n1")
        .replace("nvme0n1", "nvme2n1"),
        "/proc/diskstats": lines,
        "/sys/block/md127/md/array_state": f"{state127}\n",
        "/sys/block/md126/md/array_state": "clean\n",
    }
    for md, members in (("md127", ("nvme0n1", "nvme1n1")), ("md126", ("nvme2n1", "nvme3n1"))):
        files[f"/sys/block/{md}/md/level"] = "raid0\n"
        for slot, m in enumerate(members):
            files[f"/sys/block/{md}/md/dev-{m}/state"] = "in_sync\n"
            files[f"/sys/block/{md}/md/dev-{m}/slot"] = f"{slot}\n"
            files[f"/sys/block/{m}/size"] = "1\n"
    write_tree(tmp_path, files)


def test_arrays_loaded_in_parallel_are_compared(tmp_path: Path) -> None:
    start = {"nvme0n1": 0, "nvme1n1": 0, "nvme2n1": 0, "nvme3n1": 0}
    _strix_tree(tmp_path, start)
    clock = Clock()
    collector = RaidCollector(HostRoot(tmp_path), clock)
    collector.collect()
    clock.now = 1.0
    # 1.07 and 1.10 GB/s, split evenly over each array's two members.
    per_member = {"nvme0n1": 1.07e9 / 2, "nvme1n1": 1.07e9 / 2, "nvme2n1": 1.10e9 / 2, "nvme3n1": 1.10e9 / 2}
    _strix_tree(tmp_path, {k: int(v // 512) for k, v in per_member.items()})
    arrays = {r.name: r for r in collector.collect() if isinstance(r, RaidArrayReading)}
    assert arrays["md127"].read_bytes_per_s == pytest.approx(1.07e9, rel=1e-3)
    assert arrays["md126"].vs_fastest_array_pct == 100.0
    assert arrays["md127"].vs_fastest_array_pct == pytest.approx(97.3, abs=0.05)
    assert arrays["md127"].member_imbalance_pct == 0.0


def test_array_breaking_is_an_event(tmp_path: Path) -> None:
    zero = {"nvme0n1": 0, "nvme1n1": 0, "nvme2n1": 0, "nvme3n1": 0}
    _strix_tree(tmp_path, zero)
    collector = RaidCollector(HostRoot(tmp_path), Clock())
    assert not [r for r in collector.collect() if isinstance(r, EventDraft)]
    _strix_tree(tmp_path, zero, state127="broken")
    events = [r for r in collector.collect() if isinstance(r, EventDraft)]
    assert [(e.kind, e.severity, e.subject) for e in events] == [("raid_health_changed", "critical", "md:md127")]
