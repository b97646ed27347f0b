"""The md arrays holding an NVMe drive (``md_arrays``): an array assembled or stopped after the agent
started is seen at the next read, not when the controller's facts are next read again."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rigmon.collectors.base import NoData
from rigmon.collectors.nvme import NvmeCollector
from rigmon.collectors.nvme_md import arrays_holding, is_partition_of, parse_md_claims
from rigmon.collectors.raid import RaidCollector
from rigmon.hw.root import read_scope
from rigmon.schema import NvmeReading, RaidArrayReading
from rigmon.sim import write_tree
from rigmon.sim.node import SimNode
from rigmon.sim.nvme_drive import SimNvmeDrive
from rigmon.sim.storage import SimMdArray, SimMember, SimStorage
from rigmon.sim.tree import Tree
from tests.collectors.root_helpers import ReadLog
from tests.collectors.test_device_facts import nvme_files, nvme_readings
from tests.collectors.test_host import FakeClock

RAID0 = """Personalities : [raid0]
md126 : active raid0 nvme1n1[1] nvme0n1[0]
      3906764800 blocks super 1.2 512k chunks

unused devices: <none>
"""
RESYNCING = """Personalities : [raid1]
md127 : active raid1 nvme2n1[2] nvme1n1[1](F) nvme0n1[0]
      1953382400 blocks super 1.2 [2/1] [U_]
      [==>..................]  recovery = 12.6% (246884352/1953382400) finish=28.5min speed={speed}K/sec
      bitmap: 1/15 pages [4KB], 65536KB chunk

unused devices: <none>
"""


def test_parse_md_claims() -> None:
    assert parse_md_claims(RAID0) == (("md126", ("nvme0n1", "nvme1n1")),)
    claims = parse_md_claims(RESYNCING.format(speed=998000))
    assert claims == (("md127", ("nvme0n1", "nvme1n1", "nvme2n1")),)
    # A resync's progress lines change every second: the claims do not.
    assert parse_md_claims(RESYNCING.format(speed=1001000)) == claims
    assert parse_md_claims("Personalities : \nunused devices: <none>\n") == ()
    assert parse_md_claims("md0 : inactive nvme0n1p1[0](S)\n") == (("md0", ("nvme0n1p1",)),)
    assert parse_md_claims("garbage\nmdx\n\x00") == ()


@pytest.mark.parametrize(("namespaces", "arrays"), [
    (("nvme0n1",), {"md126"}), (("nvme2n1",), set()), (("nvme1n1", "nvme2n1"), {"md126"}),
])
def test_arrays_holding(namespaces: tuple[str, ...], arrays: set[str]) -> None:
    assert arrays_holding(parse_md_claims(RAID0), namespaces) == arrays
    # A drive partitioned before mdadm --create is in the array through its partition.
    partitioned = parse_md_claims(RAID0.replace("n1[", "n1p1["))
    assert arrays_holding(partitioned, namespaces) == arrays


@pytest.mark.parametrize(("device", "disk", "held"), [
    ("nvme0n1", "nvme0n1", False), ("nvme0n1p1", "nvme0n1", True), ("nvme0n1p12", "nvme0n1", True),
    ("nvme10n1p1", "nvme1n1", False), ("nvme1n10", "nvme1n1", False), ("nvme1n1p", "nvme1n1", False),
    ("nvme0n1p1x", "nvme0n1", False), ("sda1", "sda", True), ("sdap1", "sda", False), ("nvme0n1p١", "nvme0n1", False),
])
def test_is_partition_of(device: str, disk: str, held: bool) -> None:
    assert is_partition_of(device, disk) is held


class Node:
    """A simulated node with three NVMe drives and no md array yet, read by the real nvme and raid
    collectors a tick at a time, in one read scope as the agent does."""

    def __init__(self, tmp_path: Path, partitioned: bool = False) -> None:
        self.drives = [SimNvmeDrive(ctrl=i, address=f"0000:{0x64 + i:02x}:00.0", partitioned=partitioned)
                       for i in range(3)]
        self.storage = SimStorage(drives=self.drives)
        self.sim = SimNode(name="n", tree=Tree(tmp_path), rng=random.Random(1), devices=[self.storage])
        self.root = ReadLog(tmp_path)
        self.nvme = NvmeCollector(self.root)
        self.clock = FakeClock()
        self.raid = RaidCollector(self.root, self.clock)
        self.t_s = 0.0

    def tick(self) -> tuple[dict[str, tuple[str, ...]], list[str]]:
        """Each drive's md arrays and the arrays the raid collector shows, after one simulated second."""
        drives, arrays = self.read()
        return {r.name: r.md_arrays for r in drives}, [a.name for a in arrays]

    def read(self) -> tuple[list[NvmeReading], list[RaidArrayReading]]:
        """The drives' and arrays' readings after one simulated second."""
        self.t_s += 1.0
        self.clock.now += 1.0
        self.sim.step(self.t_s)
        self.root.read.clear()
        self.root.listed.clear()
        with read_scope():
            drives = [r for r in self.nvme.collect() if isinstance(r, NvmeReading)]
            try:
                arrays = [r for r in self.raid.collect() if isinstance(r, RaidArrayReading)]
            except NoData:  # no md array yet
                arrays = []
        return drives, arrays

    def assemble(self, number: int, drives: tuple[int, ...]) -> None:
        self.storage.assemble(SimMdArray(
            number=number, md_name=f"raid0n{number}", level="raid0", uuid=f"0000{number:04x}-5f60-7182-93a4-b5c6d7e8f900",
            members=[SimMember(self.drives[d], slot, slot) for slot, d in enumerate(drives)]))


def test_an_array_assembled_after_the_start_is_in_md_arrays_at_the_next_read_and_gone_once_stopped(
        tmp_path: Path) -> None:
    node = Node(tmp_path)
    assert node.tick() == ({"nvme0": (), "nvme1": (), "nvme2": ()}, [])
    node.tick()
    node.assemble(126, (0, 1))
    # The raid collector shows it, and the drives say they are in it, at the same tick (the
    # timeline can name a hot drive as the lagging array's cause, the alarm says "in md126").
    assert node.tick() == ({"nvme0": ("md126",), "nvme1": ("md126",), "nvme2": ()}, ["md126"])
    node.assemble(125, (2,))
    assert node.tick() == ({"nvme0": ("md126",), "nvme1": ("md126",), "nvme2": ("md125",)}, ["md125", "md126"])
    node.storage.stop("md126")  # mdadm --stop
    assert node.tick() == ({"nvme0": (), "nvme1": (), "nvme2": ("md125",)}, ["md125"])


def test_a_drive_partitioned_before_mdadm_create_is_in_the_array_its_partition_is_in(tmp_path: Path) -> None:
    node = Node(tmp_path, partitioned=True)
    assert node.tick() == ({"nvme0": (), "nvme1": (), "nvme2": ()}, [])
    node.assemble(127, (0, 1))
    node.storage.array("md127").read_target_bytes_per_s = 1.0e9
    assert node.tick() == ({"nvme0": ("md127",), "nvme1": ("md127",), "nvme2": ()}, ["md127"])
    # The raid collector's members are the partitions, in sync, reading their share of the array.
    _, arrays = node.read()
    assert [(m.name, m.slot, m.role, m.present) for m in arrays[0].members] == [
        ("nvme0n1p1", 0, "in_sync", True), ("nvme1n1p1", 1, "in_sync", True)]
    assert all(m.read_bytes_per_s == pytest.approx(0.5e9, rel=0.05) for m in arrays[0].members)
    assert arrays[0].read_bytes_per_s == pytest.approx(1.0e9, rel=0.05)
    # Nothing changed: the holders are not listed again.
    assert not [d for d in node.root.listed if d.endswith("/holders")]
    node.storage.stop("md127")
    assert node.tick() == ({"nvme0": (), "nvme1": (), "nvme2": ()}, [])


def test_a_partition_held_is_its_drive_held_in_a_tree_as_the_kernel_makes_it(tmp_path: Path) -> None:
    files = {**nvme_files("nvme0", "Samsung SSD 990 PRO 2TB"), "/sys/class/nvme/nvme0/nvme0n1/size": "100\n",
             "/sys/block/nvme0n1/size": "100\n", "/sys/block/nvme0n1/nvme0n1p1/partition": "1\n",
             "/sys/block/nvme0n1/nvme0n1p2/partition": "2\n",
             "/proc/mdstat": RAID0.replace("nvme0n1[0]", "nvme0n1p2[0]")}
    tree = write_tree(tmp_path, files)
    for part in ("nvme0n1p1", "nvme0n1p2"):
        tree.path(f"/sys/block/nvme0n1/{part}/holders").mkdir()
    tree.path("/sys/block/nvme0n1/holders").mkdir()
    tree.symlink("/sys/block/nvme0n1/nvme0n1p2/holders/md126", "../../../md126")
    root = ReadLog(tmp_path)
    collector = NvmeCollector(root)
    assert nvme_readings(collector.collect())["nvme0"].md_arrays == ("md126",)
    # /proc/mdstat and the links agree: listed no more.
    root.listed.clear()
    for _ in range(5):
        assert nvme_readings(collector.collect())["nvme0"].md_arrays == ("md126",)
    assert not [d for d in root.listed if d.endswith("/holders")]


def test_an_unchanged_node_lists_no_holders_directory(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.assemble(127, (0, 1))
    node.tick()
    for _ in range(5):
        node.tick()
        assert not [d for d in node.root.listed if d.endswith("/holders")]
        assert node.root.read.count("/proc/mdstat") == 2  # nvme and raid: read once in the scope


def test_a_member_listed_before_its_holder_link_is_made_is_seen_the_read_after(tmp_path: Path) -> None:
    files = {**nvme_files("nvme0", "Samsung SSD 990 PRO 2TB"), "/sys/class/nvme/nvme0/nvme0n1/size": "100\n",
             "/proc/mdstat": "Personalities : \nunused devices: <none>\n"}
    tree = write_tree(tmp_path, files)
    root = ReadLog(tmp_path)
    collector = NvmeCollector(root)
    assert nvme_readings(collector.collect())["nvme0"].md_arrays == ()
    # md lists the member a moment before it links its holder: a read between the two.
    tree.write("/proc/mdstat", RAID0)
    assert nvme_readings(collector.collect())["nvme0"].md_arrays == ()
    tree.symlink("/sys/block/nvme0n1/holders/md126", "../../md126")
    assert nvme_readings(collector.collect())["nvme0"].md_arrays == ("md126",)
    # /proc/mdstat and the links agree now: listed no more.
    root.listed.clear()
    for _ in range(5):
        assert nvme_readings(collector.collect())["nvme0"].md_arrays == ("md126",)
    assert "/sys/block/nvme0n1/holders" not in root.listed
