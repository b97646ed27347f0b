"""RAID collector: /proc/mdstat parsing for every array shape, member roles, health, balance, events."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.collectors.base import EventDraft
from rigmon.collectors.mdstat import MdstatArray, MdstatError, can_serve_data
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


def one(text: str) -> MdstatArray:
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


def test_empty_array_state_and_uuid_files_are_not_present(tmp_path: Path) -> None:
    """An empty ``array_state`` was the state ``""`` on the wire and screens, an empty ``uuid`` the
    identity ``""`` that alarms key arrays by: both are not present (null)."""
    zero = {"nvme0n1": 0, "nvme1n1": 0, "nvme2n1": 0, "nvme3n1": 0}
    _strix_tree(tmp_path, zero, state127="")
    write_tree(tmp_path, {"/sys/block/md127/md/uuid": "", "/sys/block/md126/md/uuid": "c513c3c9:5f607182\n"})
    arrays = {r.name: r for r in RaidCollector(HostRoot(tmp_path), Clock()).collect()
              if isinstance(r, RaidArrayReading)}
    assert (arrays["md127"].array_state, arrays["md127"].uuid, arrays["md127"].health) == (None, None, "ok")
    assert arrays["md126"].array_state == "clean" and arrays["md126"].uuid is not None


# -- Real-capture edge cases (issue 22) ------------------------------------------------------


def test_status_on_the_header_of_an_array_without_members() -> None:
    # truveris/py-mdstat test_no_disks: md_seq_show prints no blocks line without members.
    a = one("md1 : active raid5 super 1.2 level 5, 512k chunk, algorithm 2 [4/0] [____]\n")
    assert (a.members, a.metadata, a.chunk_kib) == ((), "1.2", 512)
    assert (a.raid_disks, a.working_disks, a.member_status) == (4, 0, "____")


def test_unindented_status_lines_belong_to_the_array_above() -> None:
    a, b = parse_mdstat("md0 : active raid1 sdb1[1] sda1[0]\n1023936 blocks super 1.0 [2/2] [UU]\n"
                        "md1 : active raid1 sdb3[2](F) sda3[0]\n1948488512 blocks super 1.0 [2/1] [U_]\n")
    assert (a.blocks_kib, a.working_disks, b.blocks_kib, b.member_status) == (1023936, 2, 1948488512, "U_")


def test_a_member_listed_twice_keeps_both_entries() -> None:
    a = one("md1 : active raid1 sdb3[3](S) sdb3[2](F) sda3[0]\n      1948488512 blocks super 1.0 [2/1] [U_]\n")
    assert [(m.name, m.desc_nr, m.spare, m.faulty) for m in a.members] == [
        ("sdb3", 3, True, False), ("sdb3", 2, False, True), ("sda3", 0, False, False)]


def test_a_name_listed_many_times_is_looked_up_once(tmp_path: Path) -> None:
    # A garbled line listing one member thousands of times cost two stats an entry, tens of
    # milliseconds a tick (an overrun at a short interval); presence is now found once a name.
    write_tree(tmp_path, {"/proc/mdstat": "md1 : active raid5 " + "sda[0] " * 500 + "\n",
                          "/sys/block/sda/size": "1\n", "/sys/block/md1/md/level": "raid5\n"})
    root = HostRoot(tmp_path)
    looked_up: list[str] = []
    exists = root.exists

    def counting_exists(path: str) -> bool:
        looked_up.append(path)
        return exists(path)

    root.exists = counting_exists  # type: ignore[method-assign]
    arrays = [r for r in RaidCollector(root, Clock()).collect() if isinstance(r, RaidArrayReading)]
    assert len(arrays[0].members) == 500 and all(m.present for m in arrays[0].members)
    assert len(looked_up) <= 4


@pytest.mark.parametrize(("text", "why"), [
    ("md3 : invalid\n      314159265 blocks 64k chunks\n", "state 'invalid'"),
    ("md0 : active raid9 sda1[0] sdb1[1]\n", "personality 'raid9'"),
    ("md0 : active raid1 sda1[0](X) sdb1[1]\n", "member flag (X)"),
    ("md0 : active raid1 sda1[a] sdb1[1]\n", "sda1[a]"),
    ("md0 : active raid1 sda1[0] sdb1[\n", "sdb1["),
    ("md0 : active\n", "truncated header"),
    ("md0 :\n", "truncated header"),
    ("md0 : active raid1 sda1[0] sdb1[1]\n      1000 blocks [2/3] [UU]\n", "does not add up"),
    ("md0 : active raid1 sda1[0] sdb1[1]\n      hello world\n", "not a status"),
    ("      1000 blocks [2/2] [UU]\n", "without an array header"),
    ("Personalities : raid1\n", "personalities"),
])
def test_text_that_is_not_mdstat_is_an_error_naming_the_line(text: str, why: str) -> None:
    with pytest.raises(MdstatError) as info:
        parse_mdstat(text)
    assert why in str(info.value)


@pytest.mark.parametrize(("level", "disks", "working", "status", "near", "far", "serves"), [
    ("raid5", 4, 0, "____", 1, 1, False),
    ("raid5", 4, 3, "UUU_", 1, 1, True),
    ("raid5", 4, 2, "UU__", 1, 1, False),
    ("raid6", 4, 2, "UU__", 1, 1, True),
    ("raid6", 4, 1, "U___", 1, 1, False),
    ("raid1", 2, 1, "U_", 1, 1, True),
    ("raid1", 2, 0, "__", 1, 1, False),
    # raid10 near=2 over 4 disks: mirrors are slots (0,1) and (2,3).
    ("raid10", 4, 2, "U_U_", 2, 1, True),
    ("raid10", 4, 2, "UU__", 2, 1, False),
    ("raid10", 4, 0, "____", 2, 1, False),
    (None, 4, 0, "____", 1, 1, None),
])
def test_can_serve_data(level: str | None, disks: int, working: int, status: str, near: int, far: int,
                        serves: bool | None) -> None:
    assert can_serve_data(level, disks, working, status, near, far) is serves


def test_raid10_layout_copies_are_read() -> None:
    a = one("md6 : active raid10 sdd[3](F) sdc[2](F) sdb[1](F) sda[0](F)\n"
            "      2000 blocks super 1.2 512K chunks 2 near-copies [4/0] [____]\n")
    assert (a.near_copies, a.far_copies, a.chunk_kib) == (2, 1, 512)


def test_kernel_finish_estimate_wins_over_a_computed_one(tmp_path: Path) -> None:
    write_tree(tmp_path, {
        "/proc/mdstat": "md0 : active raid1 sdf1[2] sdh1[0]\n      1953382400 blocks super 1.2 [2/1] [U_]\n"
                        "      [==>..................]  recovery = 12.6% (246300416/1953382400) finish=137.1min "
                        "speed=207456K/sec\n",
        "/sys/block/md0/md/sync_action": "recover\n",
        "/sys/block/md0/md/sync_speed": "100000\n",
        "/sys/block/md0/md/sync_completed": "492600832 / 3906764800\n",
    })
    (a,) = [r for r in RaidCollector(HostRoot(tmp_path), Clock()).collect() if isinstance(r, RaidArrayReading)]
    assert (a.sync_eta_s, a.sync_speed_bytes_per_s) == (137.1 * 60, 207456 * 1024.0)


def test_without_sys_members_are_not_called_missing(tmp_path: Path) -> None:
    write_tree(tmp_path, {"/proc/mdstat": RAID0})
    (a,) = [r for r in RaidCollector(HostRoot(tmp_path), Clock()).collect() if isinstance(r, RaidArrayReading)]
    assert a.health == "ok" and all(m.present and m.role == "in_sync" for m in a.members)
    # /proc/diskstats, when it is there, still says which devices exist.
    write_tree(tmp_path, {"/proc/diskstats": "259 0 nvme0n1 1 0 8 1 0 0 0 0 0 1 1\n"})
    (b,) = [r for r in RaidCollector(HostRoot(tmp_path), Clock()).collect() if isinstance(r, RaidArrayReading)]
    assert {m.name: m.present for m in b.members} == {"nvme0n1": True, "nvme1n1": False}
    assert b.health == "broken"


def test_inactive_array_has_nothing_working_and_needs_what_sysfs_says(tmp_path: Path) -> None:
    write_tree(tmp_path, {"/proc/mdstat": "md127 : inactive sda[0] sdb[1] sdc[2](S)\n      6282240 blocks super 1.2\n"})
    (a,) = [r for r in RaidCollector(HostRoot(tmp_path), Clock()).collect() if isinstance(r, RaidArrayReading)]
    assert (a.health, a.working_disks, a.raid_disks, a.degraded) == ("inactive", 0, None, None)
    write_tree(tmp_path, {"/sys/block/md127/md/raid_disks": "3\n", "/sys/block/md127/md/array_state": "inactive\n"})
    (b,) = [r for r in RaidCollector(HostRoot(tmp_path), Clock()).collect() if isinstance(r, RaidArrayReading)]
    assert (b.health, b.working_disks, b.raid_disks) == ("inactive", 0, 3)


IMSM = """Personalities : [raid1] 
md126 : active raid1 sda[1] sdb[0]
      976759808 blocks super external:/md127/0 [2/2] [UU]
      
md127 : inactive sdb[1](S) sda[0](S)
      5288 blocks super external:imsm
       
unused devices: <none>
"""


@pytest.mark.parametrize("sysfs", [True, False])
def test_external_metadata_container_is_not_an_inactive_array(tmp_path: Path, sysfs: bool) -> None:
    # Intel RST (IMSM) and DDF: the container holds the disks and their metadata and is never
    # started (mdstat ``inactive``); its volumes (md126 here) are the arrays that run.
    files = {"/proc/mdstat": IMSM,
             "/proc/diskstats": "   8       0 sda 1 0 8 1 0 0 0 0 0 1 1\n   8      16 sdb 1 0 8 1 0 0 0 0 0 1 1\n"}
    if sysfs:
        files.update({
            "/sys/block/md127/md/level": "container\n", "/sys/block/md127/md/array_state": "inactive\n",
            "/sys/block/md127/md/metadata_version": "external:imsm\n",
            "/sys/block/md126/md/level": "raid1\n", "/sys/block/md126/md/array_state": "clean\n",
            "/sys/block/md126/md/degraded": "0\n", "/sys/block/md126/md/sync_action": "idle\n",
            "/sys/block/sda/stat": "1\n", "/sys/block/sdb/stat": "1\n",
        })
    write_tree(tmp_path, files)
    records = RaidCollector(HostRoot(tmp_path), Clock()).collect()
    arrays = {r.name: r for r in records if isinstance(r, RaidArrayReading)}
    assert (arrays["md127"].health, arrays["md126"].health) == ("ok", "ok")
    assert not [r for r in records if isinstance(r, EventDraft)]
    # A volume is not a container, whatever its metadata says.
    inactive_volume = IMSM.replace("md126 : active raid1 sda[1] sdb[0]", "md126 : inactive sda[1] sdb[0]")
    write_tree(tmp_path, {"/proc/mdstat": inactive_volume})
    arrays = {r.name: r for r in RaidCollector(HostRoot(tmp_path), Clock()).collect()
              if isinstance(r, RaidArrayReading)}
    assert (arrays["md127"].health, arrays["md126"].health) == ("ok", "inactive")


def test_an_array_being_stopped_costs_only_its_own_sysfs_readings(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # md_attr_show answers EBUSY once an array is being deleted (mdadm --stop), until its
    # directory goes: the other array still reads, and the stopping one reads from mdstat.
    import errno

    from tests.hw.refusals import refuse_reads

    two = RAID0 + "md126 : active raid1 sdb[1] sda[0]\n      976759808 blocks super 1.2 [2/2] [UU]\n      \n"
    files = {"/proc/mdstat": two}
    for md, level in (("md127", "raid0"), ("md126", "raid1")):
        files.update({f"/sys/block/{md}/md/level": f"{level}\n", f"/sys/block/{md}/md/array_state": "clean\n"})
    for member, md in (("nvme0n1", "md127"), ("nvme1n1", "md127"), ("sda", "md126"), ("sdb", "md126")):
        files.update({f"/sys/block/{md}/md/dev-{member}/state": "in_sync\n", f"/sys/block/{member}/stat": "1\n"})
    write_tree(tmp_path, files)
    stopping = f"{tmp_path}/sys/block/md126/md/"
    refuse_reads(monkeypatch, lambda path: errno.EBUSY if path.startswith(stopping) else None)
    arrays = {r.name: r for r in RaidCollector(HostRoot(tmp_path), Clock()).collect()
              if isinstance(r, RaidArrayReading)}
    assert (arrays["md127"].health, arrays["md127"].array_state) == ("ok", "clean")
    assert (arrays["md126"].health, arrays["md126"].array_state, arrays["md126"].level) == ("ok", None, "raid1")


def test_udev_events_of_devices_that_are_never_md_re_read_nothing() -> None:
    from rigmon.collectors.raid import concerns_arrays
    from rigmon.hw.udev import UdevEvent

    def event(name: str) -> UdevEvent:
        return UdevEvent("change", "block", name, f"/devices/virtual/block/{name}", "disk", {})

    assert [n for n in ("loop7", "ram0", "zram0", "sr0", "md127", "sda1", "nvme0n1p2", "dm-3") if concerns_arrays(event(n))] \
        == ["md127", "sda1", "nvme0n1p2", "dm-3"]


RECOVERING = "md6 : active raid1 sdb2[2] sda2[0]\n      195310144 blocks [2/1] [U_]\n" \
             "      [=>...................]  recovery =  8.5% (16775552/195310144) finish=17.0min speed=259783K/sec\n"


@pytest.mark.parametrize(("text", "rebuilding"), [
    # Added after the array was made, sdb2 has index 2: past [U_], so the one md rebuilds.
    (RECOVERING, ["sdb2"]),
    # A member the array was made with, back in its own slot: its index is the "_".
    (RECOVERING.replace("sdb2[2]", "sdb2[1]"), ["sdb2"]),
    # A spare not picked up yet is (S), not rebuilt; nor is a faulty member.
    (RECOVERING.replace("sdb2[2] sda2[0]", "sdc2[3](S) sdb2[2] sda2[0] sdd2[1](F)"), ["sdb2"]),
    # Two candidates past the status for one slot rebuilt: mdstat does not say which.
    (RECOVERING.replace("sda2[0]", "sda2[3]"), []),
    # resync rebuilds no member; a recovery that waits has not started.
    (RECOVERING.replace("recovery =", "resync ="), []),
    ("md6 : active raid1 sdb2[2] sda2[0]\n      195310144 blocks [2/1] [U_]\n        resync=DELAYED\n", []),
    (("md7 : active raid6 sdb1[0] sde1[3] sdd1[2] sdc1[1]\n      7813735424 blocks super 1.2 level 6, 512k chunk, "
      "algorithm 2 [4/3] [U_UU]\n      [>....]  recovery =  1.0% (1/100) finish=1.0min speed=1K/sec\n"), ["sdc1"]),
])
def test_recovery_marks_the_member_in_the_slot_being_rebuilt(text: str, rebuilding: list[str]) -> None:
    assert [m.name for m in one(text).members if m.rebuilding] == rebuilding


def test_without_sysfs_state_a_member_being_rebuilt_is_rebuilding_not_in_sync(tmp_path: Path) -> None:
    # No md/dev-* in the tree (a capture without /sys): mdstat alone tells the member rebuilt.
    write_tree(tmp_path, {"/proc/mdstat": RECOVERING.replace("sdb2[2] sda2[0]", "sdc2[3](S) sdb2[2] sda2[0]")})
    (a,) = [r for r in RaidCollector(HostRoot(tmp_path), Clock()).collect() if isinstance(r, RaidArrayReading)]
    assert {m.name: m.role for m in a.members} == {"sda2": "in_sync", "sdb2": "rebuilding", "sdc2": "spare"}
    assert a.health == "recovering"


MD6_RECOVERING = """Personalities : [raid1] 
md6 : active raid1 sdb2[2] sda2[0]
      195310144 blocks [2/1] [U_]
      [=>...................]  recovery =  8.5% (16775552/195310144) finish=17.0min speed=259783K/sec

unused devices: <none>
"""


def test_mdstat_descriptor_number_is_not_given_as_the_slot(tmp_path: Path) -> None:
    # sdb2[2] rebuilds into slot 1 of a 2-disk array: [2] is its descriptor number. Without md sysfs
    # the slot is unknown, not 2; the number is kept as `device`, and orders the members.
    write_tree(tmp_path, {"/proc/mdstat": MD6_RECOVERING})
    [array] = [r for r in RaidCollector(HostRoot(tmp_path), Clock()).collect() if isinstance(r, RaidArrayReading)]
    assert [(m.name, m.slot, m.device, m.role) for m in array.members] == [
        ("sda2", None, 0, "in_sync"), ("sdb2", None, 2, "rebuilding")]
    assert array.health == "recovering"
    # With sysfs the slot is the kernel's own.
    write_tree(tmp_path, {"/sys/block/md6/md/dev-sda2/slot": "0\n", "/sys/block/md6/md/dev-sda2/state": "in_sync\n",
                          "/sys/block/md6/md/dev-sdb2/slot": "1\n", "/sys/block/md6/md/dev-sdb2/state": "spare\n",
                          "/sys/class/block/sda2/size": "1\n", "/sys/class/block/sdb2/size": "1\n"})
    [array] = [r for r in RaidCollector(HostRoot(tmp_path), Clock()).collect() if isinstance(r, RaidArrayReading)]
    assert [(m.name, m.slot, m.device, m.role) for m in array.members] == [
        ("sda2", 0, 0, "in_sync"), ("sdb2", 1, 2, "rebuilding")]
