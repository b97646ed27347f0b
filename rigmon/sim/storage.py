"""Fake storage: NVMe drives and md arrays writing /proc/diskstats, /proc/mdstat, /sys/block, /sys/class/nvme."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from rigmon.sim.counters import CarriedCounters
from rigmon.sim.node import SimNode
from rigmon.sim.nvme_drive import (
    KIB,
    NVME_HWMON_FILES,
    NVME_WCTEMP_C,
    PARTITION_START_SECTORS,
    REQUEST_BYTES,
    SECTOR_BYTES,
    SimNvmeDrive,
    partition_stats,
)
from rigmon.sim.thunderbolt import SimTbRouter, SimThunderbolt
from rigmon.sim.tree import Tree

NVME_MAJOR = 259
MD_MAJOR = 9


@dataclass
class SimMember:
    """A drive's place in an array (through its partition when it has one, see `SimNvmeDrive.member`):
    ``state`` is ``in_sync``, ``faulty``, ``spare`` or ``rebuilding``."""

    drive: SimNvmeDrive
    slot: int | None
    desc_nr: int
    state: str = "in_sync"


@dataclass
class SimMdArray:
    """An md array of NVMe drives moving the bytes a scenario asks for.

    A RAID0 array stripes reads over its members and is as fast as its slowest member times
    their number; it breaks when a member goes away. A RAID1 array mirrors writes and can
    recover onto a new member at ``recovery_bytes_per_s``.
    """

    number: int
    md_name: str
    level: str
    members: list[SimMember]
    uuid: str
    chunk_kib: int = 512
    read_target_bytes_per_s: float = 0.0
    write_target_bytes_per_s: float = 0.0
    recovery_bytes_per_s: float = 1.0e9
    sync_action: str = "idle"
    sync_done_sectors: int = 0
    reads: int = 0
    read_sectors: int = 0
    read_ms: int = 0
    writes: int = 0
    write_sectors: int = 0
    write_ms: int = 0
    io_ms: float = 0.0
    sync_speed_kib: int = 0

    @property
    def name(self) -> str:
        """Kernel name (``md127``)."""
        return f"md{self.number}"

    @property
    def striped(self) -> bool:
        """RAID0/linear: no redundancy."""
        return self.level in ("raid0", "linear")

    @property
    def raid_disks(self) -> int:
        """Slots of the array."""
        return len([m for m in self.members if m.slot is not None])

    @property
    def size_kib(self) -> int:
        """Array size in KiB."""
        sizes = [m.drive.member_kib for m in self.members if m.slot is not None]
        return sum(sizes) if self.striped else min(sizes)

    def working(self) -> list[SimMember]:
        """Members in sync whose drive is present."""
        return [m for m in self.members if m.state == "in_sync" and m.drive.present]

    @property
    def broken(self) -> bool:
        """A striped array that lost a member."""
        return self.striped and any(not m.drive.present or m.state == "faulty" for m in self.members)

    def advance(self, dt_s: float, cap: Callable[[SimNvmeDrive], float], rng: random.Random) -> None:
        """Move this step's bytes: array counters, member counters, recovery progress."""
        work = self.working()
        self.sync_speed_kib = 0
        if dt_s <= 0 or not work or self.broken:
            return
        noise = rng.uniform(0.99, 1.01)
        member_cap = min(cap(m.drive) for m in work)
        if self.striped:
            read_cap = member_cap * len(work)
            write_cap = read_cap
        else:
            read_cap = sum(cap(m.drive) for m in work)
            write_cap = member_cap
        rd = min(self.read_target_bytes_per_s * noise, read_cap) * dt_s
        wr = min(self.write_target_bytes_per_s * noise, write_cap) * dt_s
        share = 1.0 / len(work)
        rebuilding = [m for m in self.members if m.state == "rebuilding" and m.drive.present]
        recover = 0.0
        if self.sync_action == "recover" and rebuilding:
            total = self.size_kib * 2
            recover = min(self.recovery_bytes_per_s * dt_s, (total - self.sync_done_sectors) * SECTOR_BYTES)
            self.sync_done_sectors += int(recover // SECTOR_BYTES)
            self.sync_speed_kib = int(self.recovery_bytes_per_s / KIB)
            if self.sync_done_sectors >= total:
                for m in rebuilding:
                    m.state = "in_sync"
                self.sync_action = "idle"
                self.sync_done_sectors = 0
        for m in work:
            member_wr = wr * share if self.striped else wr
            m.drive.do_io(rd * share + recover * share, member_wr, dt_s)
        for m in rebuilding:
            m.drive.do_io(0.0, wr + recover, dt_s)
        n = int(rd // REQUEST_BYTES)
        nw = int(wr // REQUEST_BYTES)
        self.reads += n
        self.writes += nw
        self.read_sectors += int(rd // SECTOR_BYTES)
        self.write_sectors += int(wr // SECTOR_BYTES)
        self.read_ms += int(n * 0.4)
        self.write_ms += int(nw * 0.5)
        busy = max(rd, wr) / dt_s / max(read_cap, 1.0)
        self.io_ms += dt_s * 1000.0 * min(1.0, busy * 1.6)

    def stats(self) -> list[int]:
        """The 17 diskstats counters (md is bio based: merges and flushes stay 0)."""
        return [self.reads, 0, self.read_sectors, self.read_ms, self.writes, 0, self.write_sectors,
                self.write_ms, 0, int(self.io_ms), self.read_ms + self.write_ms, 0, 0, 0, 0, 0, 0]


@dataclass
class SimStorage:
    """The node's block layer: drives and arrays, written as one kernel would.

    Args:
        drives: NVMe drives.
        arrays: md arrays over them.
        link_cap: bytes/s a drive's tunnel can carry (``None``: not tunnelled).
        diskstats_counters: 11, 15 or 17 counters per diskstats line (kernel < 4.18, < 5.5, 5.5+).
    """

    drives: list[SimNvmeDrive] = field(default_factory=list)
    arrays: list[SimMdArray] = field(default_factory=list)
    link_cap: Callable[[str | None], float | None] = lambda router: None
    diskstats_counters: int = 17
    _rng: random.Random | None = None
    _written: set[str] = field(default_factory=set)
    #: Arrays the tree holds, with their ``/dev/md`` names: one no longer in `arrays` was stopped.
    _assembled: dict[str, str] = field(default_factory=dict)
    _node: SimNode | None = field(default=None, repr=False)
    _carried: CarriedCounters = field(default_factory=CarriedCounters)
    """Each drive's and array's diskstats counters, carried on to the write time."""

    def drive(self, ns: str) -> SimNvmeDrive:
        """The drive whose namespace is ``ns``."""
        return next(d for d in self.drives if d.ns == ns)

    def array(self, name: str) -> SimMdArray:
        """The array called ``name`` (``md127``)."""
        return next(a for a in self.arrays if a.name == name)

    def assemble(self, array: SimMdArray) -> None:
        """Assemble ``array`` (``mdadm --assemble``) over drives of this node: in the tree at the next write."""
        self.arrays.append(array)

    def stop(self, name: str) -> None:
        """Stop array ``name`` (``mdadm --stop``): gone from the tree at the next write, its members free."""
        self.arrays.remove(self.array(name))

    def _cap(self, drive: SimNvmeDrive) -> float:
        if not drive.present:
            return 0.0
        # A drive reads no faster than its own PCIe link carries (a Gen4 drive trained at
        # Gen3 x4 tops out near 3.5 GB/s), nor than its share of a USB4 tunnel.
        own = min(drive.read_cap_bytes_per_s, drive.pcie_bytes_per_s)
        link = self.link_cap(drive.router)
        if link is None:
            return own
        sharing = sum(1 for d in self.drives if d.router == drive.router and d.present)
        return min(own, link / max(1, sharing))

    def advance(self, node: SimNode, t_s: float, dt_s: float) -> None:
        if self._rng is None:
            self._rng = random.Random(node.rng.random())
        self._node = node
        before: dict[str, list[int]] = {d.ns: d.stats() for d in self.drives}
        before.update((a.name, a.stats()) for a in self.arrays)
        self._carried.step(t_s, dt_s, before)
        for a in self.arrays:
            a.advance(dt_s, self._cap, self._rng)

    def _counters(self, key: str, now: list[int]) -> list[int]:
        """``now`` (the counters at the last grid point) carried on to the time the tree is written for.

        A real kernel's counters move with every request, but physics advance on a 0.1 s grid:
        written as they stand at the grid, a reader 1 s apart would see 9, 10 or 11 steps of
        I/O (rates jumping +-10 %). So they go on at the last step's pace up to the write time,
        and never below what was written before (a load that stops leaves them standing).
        """
        return self._carried.at(key, now, self._node.write_t_s if self._node is not None else 0.0)

    def write(self, tree: Tree) -> None:
        stats = {d.ns: self._counters(d.ns, d.stats()) for d in self.drives if d.present}
        stats.update((d.part, partition_stats(stats[d.ns])) for d in self.drives if d.present and d.part)
        stats.update((a.name, self._counters(a.name, a.stats())) for a in self.arrays)
        lines = []
        # NVMe namespaces and their partitions take minors of block's extended range in turn (a
        # disk, then its partitions, as they are added): nvme0n1 259:0, nvme0n1p1 259:1, nvme1n1 259:2.
        minor = 0
        for d in self.drives:
            for name in (d.ns, d.part) if d.part else (d.ns,):
                if d.present:
                    lines.append(self._diskstats_line(NVME_MAJOR, minor, name, stats[name]))
                minor += 1
        for a in self.arrays:
            lines.append(self._diskstats_line(MD_MAJOR, a.number, a.name, stats[a.name]))
        # A stopped array's members are let go (mdadm --stop) before its mdstat line goes, as md
        # unlinks their holders before it drops them from the array; an assembled one is written
        # after its mdstat line (md lists a member a moment before it links its holder).
        self._stop_arrays(tree)
        tree.write("/proc/diskstats", "".join(lines))
        tree.write("/proc/mdstat", self._mdstat())
        for d in self.drives:
            self._write_drive(tree, d, stats.get(d.ns))
        for a in self.arrays:
            self._write_array(tree, a, stats[a.name])

    def _stop_arrays(self, tree: Tree) -> None:
        """Remove what the tree holds of arrays no longer in `arrays` (stopped: ``mdadm --stop``): the
        members' holders links, the array's block device and its ``/dev/md`` name."""
        for name, md_name in list(self._assembled.items()):
            if any(a.name == name for a in self.arrays):
                continue
            for d in self.drives:
                tree.remove(f"/sys/block/{d.member_dir}/holders/{name}")
            tree.remove(f"/sys/block/{name}")
            tree.remove(f"/dev/md/{md_name}")
            self._written.discard(f"/sys/block/{name}/md")
            del self._assembled[name]

    def _diskstats_line(self, major: int, minor: int, name: str, stats: list[int]) -> str:
        counters = " ".join(str(v) for v in stats[: self.diskstats_counters])
        return f"{major:4d} {minor:7d} {name} {counters}\n"

    def _mdstat(self) -> str:
        personalities = sorted({a.level for a in self.arrays})
        out = ["Personalities : " + "".join(f"[{p}] " for p in personalities) + "\n"]
        for a in sorted(self.arrays, key=lambda a: a.number):
            state = "broken" if a.broken else "active"
            members = ""
            # The kernel lists members newest first.
            for m in reversed(a.members):
                flags = "(F)" if m.state == "faulty" else "(S)" if m.state == "spare" else ""
                members += f" {m.drive.member}[{m.desc_nr}]{flags}"
            out.append(f"{a.name} : {state} {a.level}{members}\n")
            if a.striped:
                out.append(f"      {a.size_kib} blocks super 1.2 {a.chunk_kib}k chunks\n")
            else:
                slots = sorted((m for m in a.members if m.slot is not None), key=lambda m: m.slot or 0)
                status = "".join("U" if m.state == "in_sync" and m.drive.present else "_" for m in slots)
                out.append(f"      {a.size_kib} blocks super 1.2 [{len(slots)}/{status.count('U')}] [{status}]\n")
                if a.sync_action == "recover":
                    total = a.size_kib * 2
                    per_mille = a.sync_done_sectors * 1000 // max(1, total)
                    filled = per_mille * 20 // 1000
                    # md.c status_resync: x = per_milli/50 '=', a '>', then 20 - x '.' (21 in all).
                    bar = "=" * filled + ">" + "." * (20 - filled)
                    left_s = (total - a.sync_done_sectors) * SECTOR_BYTES / max(1.0, a.recovery_bytes_per_s)
                    out.append(
                        f"      [{bar}]  recovery ={per_mille // 10:3d}.{per_mille % 10}% "
                        f"({a.sync_done_sectors // 2}/{total // 2}) finish={left_s / 60:.1f}min "
                        f"speed={a.sync_speed_kib}K/sec\n"
                    )
            out.append("      \n")
        out.append("unused devices: <none>\n")
        return "".join(out)

    def _write_drive(self, tree: Tree, d: SimNvmeDrive, stats: list[int] | None) -> None:
        ctrl = f"/sys/class/nvme/nvme{d.ctrl}"
        pci = f"/sys/bus/pci/devices/{d.address}"
        if not d.present:
            if ctrl in self._written:
                for path in (ctrl, pci, f"/sys/block/{d.ns}"):
                    tree.remove(path)
                d.hwmon.unregister(tree)
                self._written.discard(ctrl)
            return
        if ctrl not in self._written:
            self._written.add(ctrl)
            tree.write(f"{ctrl}/model", f"{d.model:<40}\n")
            tree.write(f"{ctrl}/serial", f"{d.serial:<20}\n")
            tree.write(f"{ctrl}/firmware_rev", f"{d.firmware:<8}\n")
            tree.write(f"{ctrl}/transport", "pcie\n")
            tree.write(f"{ctrl}/address", f"{d.address}\n")
            tree.write(f"{ctrl}/numa_node", "-1\n")
            tree.write(f"{ctrl}/{d.ns}/size", f"{d.size_kib * 2}\n")
            tree.symlink(f"{ctrl}/device", f"../../../bus/pci/devices/{d.address}")
            # A controller is a class device (``nvme``); its PCI function is on the ``pci`` bus.
            tree.symlink(f"{ctrl}/subsystem", "../../../class/nvme")
            tree.symlink(f"{pci}/subsystem", "../../../../bus/pci")
            tree.write(f"{pci}/max_link_speed", f"{d.max_link_gts}\n")
            tree.write(f"{pci}/max_link_width", f"{d.max_link_width}\n")
            tree.write(f"/sys/block/{d.ns}/size", f"{d.size_kib * 2}\n")
            if d.part:
                tree.write(f"/sys/block/{d.ns}/{d.part}/partition", "1\n")
                tree.write(f"/sys/block/{d.ns}/{d.part}/start", f"{PARTITION_START_SECTORS}\n")
                tree.write(f"/sys/block/{d.ns}/{d.part}/size", f"{d.part_sectors}\n")
        tree.write(f"{ctrl}/state", "live\n")
        # temp1_alarm is the SMART log's critical warning temperature bit: the composite at or over
        # the over-temperature threshold (WCTEMP unless set otherwise), as the drive itself judges it.
        millideg = d.composite_millideg
        alarm = "1" if millideg >= round(NVME_WCTEMP_C * 1000) else "0"
        d.hwmon.write(tree, {"temp1_input": f"{millideg}\n", "temp1_alarm": f"{alarm}\n"}, fixed=NVME_HWMON_FILES)
        tree.write(f"{pci}/current_link_speed", f"{d.link_gts}\n")
        tree.write(f"{pci}/current_link_width", f"{d.link_width}\n")
        disk = stats or d.stats()
        tree.write(f"/sys/block/{d.ns}/stat", _stat_line(disk))
        if d.part:
            tree.write(f"/sys/block/{d.ns}/{d.part}/stat", _stat_line(partition_stats(disk)))

    def _write_array(self, tree: Tree, a: SimMdArray, stats: list[int]) -> None:
        base = f"/sys/block/{a.name}/md"
        if base not in self._written:
            self._written.add(base)
            self._assembled[a.name] = a.md_name
            tree.write(f"{base}/level", f"{a.level}\n")
            tree.write(f"{base}/chunk_size", f"{a.chunk_kib * KIB}\n")
            tree.write(f"{base}/metadata_version", "1.2\n")
            tree.write(f"{base}/uuid", f"{a.uuid}\n")
            tree.symlink(f"/dev/md/{a.md_name}", f"../{a.name}")
        tree.write(f"{base}/raid_disks", f"{a.raid_disks}\n")
        tree.write(f"{base}/array_state", "broken\n" if a.broken else "clean\n")
        tree.write(f"/sys/block/{a.name}/stat", _stat_line(stats))
        if not a.striped:
            missing = a.raid_disks - len(a.working())
            tree.write(f"{base}/degraded", f"{missing}\n")
            tree.write(f"{base}/sync_action", f"{a.sync_action}\n")
            if a.sync_action == "idle":
                tree.write(f"{base}/sync_completed", "none\n")
                tree.write(f"{base}/sync_speed", "none\n")
            else:
                tree.write(f"{base}/sync_completed", f"{a.sync_done_sectors} / {a.size_kib * 2}\n")
                tree.write(f"{base}/sync_speed", f"{a.sync_speed_kib}\n")
        listed = {f"dev-{m.drive.member}" for m in a.members}
        dirs = {d.member: d.member_dir for d in self.drives}
        for entry in tree_listdir(tree, base):
            if entry.startswith("dev-") and entry not in listed:
                tree.remove(f"{base}/{entry}")
                member = entry.removeprefix("dev-")
                tree.remove(f"/sys/block/{dirs.get(member, member)}/holders/{a.name}")
        for m in a.members:
            dev = f"{base}/dev-{m.drive.member}"
            words = {"in_sync": "in_sync", "faulty": "faulty", "spare": "spare", "rebuilding": "spare"}[m.state]
            tree.write(f"{dev}/state", f"{words}\n")
            tree.write(f"{dev}/slot", f"{m.slot}\n" if m.slot is not None and m.state != "spare" else "none\n")
            tree.write(f"{dev}/errors", "0\n")
            tree.write(f"{dev}/size", f"{m.drive.member_kib}\n")
            if not tree.path(f"{dev}/block").is_symlink():
                tree.symlink(f"{dev}/block", f"../../../{m.drive.member_dir}")
            # The member's side of the claim: bd_link_disk_holder makes <member>/holders/<md> (a
            # partition's under its disk's directory: nvme0n1/nvme0n1p1/holders/md127).
            holder = f"/sys/block/{m.drive.member_dir}/holders/{a.name}"
            if m.drive.present and not tree.path(holder).is_symlink():
                tree.symlink(holder, "../" * (m.drive.member_dir.count("/") + 2) + a.name)

    def close(self) -> None:
        """Nothing to release."""


def _stat_line(stats: list[int]) -> str:
    """A block device's ``stat`` file: its counters as ``%8lu``, separated by a space."""
    return "".join(f"{v:8d} " for v in stats).rstrip() + "\n"


def tree_listdir(tree: Tree, rel: str) -> list[str]:
    """Entries of a directory of the fake tree (empty when absent)."""
    path = tree.path(rel)
    return sorted(p.name for p in path.iterdir()) if path.is_dir() else []


def strix_enclosure_rig(node: SimNode, enclosures: int = 2, first_domain: int = 0, partitioned: bool = False
                        ) -> tuple[SimStorage, SimThunderbolt]:
    """The reference Strix Halo box: per USB4 domain one enclosure of two NVMe as a RAID0 array.

    Enclosure ``i`` is router ``<first_domain + i>-1``; its array is ``md<127 - i>``
    (``/dev/md/raid0n<i>``), assembled downward from md127 as mdadm does. With ``partitioned``, each
    drive holds one partition and the arrays are made of those (``md127 : active raid0 nvme1n1p1[1]
    nvme0n1p1[0]``), as on a rig whose drives were partitioned before ``mdadm --create``.
    """
    tb = SimThunderbolt(domains=first_domain + enclosures)
    storage = SimStorage(link_cap=tb.link_cap_bytes_per_s)
    for i in range(enclosures):
        router = f"{first_domain + i}-1"
        uid = f"{node.rng.getrandbits(32):08x}-0080-7708-2330-a1c81e0a1914"
        tb.routers.append(SimTbRouter(name=router, unique_id=uid))
        members = []
        for j in range(2):
            ctrl = 2 * i + j
            drive = SimNvmeDrive(
                ctrl=ctrl,
                serial=f"S6Z2NF0W{node.rng.randrange(10**6):06d}{chr(65 + ctrl)}",
                address=f"0000:{0x64 + 3 * i + j:02x}:00.0",
                router=router,
                partitioned=partitioned,
            )
            storage.drives.append(drive)
            members.append(SimMember(drive=drive, slot=j, desc_nr=j))
        uuid = f"{node.rng.getrandbits(32):08x}-5f60-7182-93a4-b5c6d7e8f9{i:02x}"
        storage.arrays.append(SimMdArray(number=127 - i, md_name=f"raid0n{i}", level="raid0",
                                         members=members, uuid=uuid))
    return storage, tb
