"""RAID collector: md arrays from /proc/mdstat and /sys/block/mdX/md, with member throughput balance."""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from rigmon.clock import Clock
from rigmon.collectors.base import (
    CollectorContext,
    EventDraft,
    NoData,
    PolledCollector,
    PushFn,
)
from rigmon.collectors.device_facts import DeviceFacts
from rigmon.collectors.disks import DiskRates, DiskRateTracker, parse_diskstats
from rigmon.collectors.udev_rescan import UdevRescan
from rigmon.hw.root import HostRoot
from rigmon.hw.udev import UdevSource, open_udev_source
from rigmon.schema import (
    RaidArrayReading,
    RaidHealth,
    RaidMemberReading,
    RaidMemberRole,
)

KIB = 1024
SECTOR_BYTES = 512
#: Levels without redundancy: no sync files, no degraded count; a lost member breaks the array.
STRIPED_LEVELS = frozenset({"raid0", "linear"})
#: /proc/mdstat's progress word -> the sysfs ``sync_action`` word, so both sources agree.
_MDSTAT_ACTIONS = {"recovery": "recover", "resync": "resync", "check": "check", "reshape": "reshape",
                   "repair": "repair"}

# md127 : active (auto-read-only) raid1 nvme1n1[1](W) nvme0n1[0](F)
_HEADER = re.compile(r"^(?P<name>\S+) : (?P<state>\S+)(?: \((?P<ro>read-only|auto-read-only)\))?(?P<rest>.*)$")
# nvme0n1[0](W)(F)
_MEMBER = re.compile(r"^(?P<name>[^\[\s]+)\[(?P<nr>\d+)\](?P<flags>(?:\([A-Z]\))*)$")
_BLOCKS = re.compile(r"^\s*(?P<blocks>\d+) blocks")
_SUPER = re.compile(r"\bsuper (?P<super>\S+)")
_CHUNK = re.compile(r"\b(?P<kib>\d+)[kK] chunks?\b")
_DISKS = re.compile(r"\[(?P<raid>\d+)/(?P<working>\d+)\] \[(?P<status>[U_]+)\]")
#       [==>..................]  recovery = 12.6% (246300416/1953382400) finish=137.1min speed=207456K/sec
_PROGRESS = re.compile(
    r"(?P<action>[a-z]+) =\s*(?P<pct>\d+(?:\.\d+)?)% \((?P<done>\d+)/(?P<total>\d+)\)"
    r"(?: finish=(?P<finish>\d+(?:\.\d+)?)min)?(?: speed=(?P<speed>\d+)K/sec)?"
)
_PENDING = re.compile(r"\b(?P<action>resync|recovery|reshape|check)=(?P<why>DELAYED|PENDING|REMOTE)")


@dataclass(frozen=True, slots=True)
class MdstatMember:
    """A member as /proc/mdstat lists it: kernel name, role index and flags."""

    name: str
    desc_nr: int
    write_mostly: bool = False
    journal: bool = False
    faulty: bool = False
    spare: bool = False
    replacement: bool = False


@dataclass(frozen=True, slots=True)
class MdstatArray:
    """One array block of /proc/mdstat.

    ``sync_*`` come from the progress line of redundant levels; ``sync_pending`` is
    ``DELAYED``/``PENDING`` when a resync waits (another array on the same disks syncs).
    """

    name: str
    state: str
    read_only: str | None
    level: str | None
    members: tuple[MdstatMember, ...]
    blocks_kib: int | None = None
    metadata: str | None = None
    chunk_kib: int | None = None
    raid_disks: int | None = None
    working_disks: int | None = None
    member_status: str | None = None
    sync_action: str | None = None
    sync_pending: str | None = None
    sync_pct: float | None = None
    sync_done_kib: int | None = None
    sync_total_kib: int | None = None
    sync_finish_min: float | None = None
    sync_speed_kib_per_s: int | None = None


def _parse_header(line: str) -> MdstatArray | None:
    m = _HEADER.match(line)
    if m is None:
        return None
    level = None
    members: list[MdstatMember] = []
    for token in m["rest"].split():
        mem = _MEMBER.match(token)
        if mem is None:
            # The personality comes before the members; inactive arrays have none.
            if not members and level is None:
                level = token
            continue
        flags = mem["flags"]
        members.append(MdstatMember(
            name=mem["name"], desc_nr=int(mem["nr"]),
            write_mostly="(W)" in flags, journal="(J)" in flags, faulty="(F)" in flags,
            spare="(S)" in flags, replacement="(R)" in flags,
        ))
    return MdstatArray(name=m["name"], state=m["state"], read_only=m["ro"], level=level, members=tuple(members))


def _with_detail(array: MdstatArray, line: str) -> MdstatArray:
    """Fold one continuation line (sizes, disk status, progress) into ``array``."""
    updates: dict[str, object] = {}
    if (m := _BLOCKS.match(line)) is not None:
        updates["blocks_kib"] = int(m["blocks"])
        if (s := _SUPER.search(line)) is not None:
            updates["metadata"] = s["super"]
        if (c := _CHUNK.search(line)) is not None:
            updates["chunk_kib"] = int(c["kib"])
        if (d := _DISKS.search(line)) is not None:
            updates.update(raid_disks=int(d["raid"]), working_disks=int(d["working"]), member_status=d["status"])
    elif (p := _PROGRESS.search(line)) is not None:
        updates.update(
            sync_action=_MDSTAT_ACTIONS.get(p["action"], p["action"]),
            sync_pct=float(p["pct"]),
            sync_done_kib=int(p["done"]),
            sync_total_kib=int(p["total"]),
            sync_finish_min=float(p["finish"]) if p["finish"] else None,
            sync_speed_kib_per_s=int(p["speed"]) if p["speed"] else None,
        )
    elif (q := _PENDING.search(line)) is not None:
        updates.update(sync_action=_MDSTAT_ACTIONS.get(q["action"], q["action"]), sync_pending=q["why"])
    if not updates:
        return array
    return dataclasses.replace(array, **updates)  # type: ignore[arg-type]


def parse_mdstat(text: str) -> list[MdstatArray]:
    """Parse /proc/mdstat into its arrays.

    Handles active, inactive and broken arrays, read-only flags, member flags (W, J, F, S,
    R), RAID0 chunk lines (no progress line), [n/m] [UU_] status, and resync / recovery /
    check / reshape progress or ``resync=DELAYED``/``PENDING``.
    """
    arrays: list[MdstatArray] = []
    current: MdstatArray | None = None
    for line in text.splitlines():
        if line.startswith(("Personalities", "unused devices")):
            current = None
            continue
        if line and not line[0].isspace():
            # md127 : active raid0 nvme1n1[1] nvme0n1[0]
            current = _parse_header(line)
            if current is not None:
                arrays.append(current)
            continue
        if current is None or not line.strip():
            continue
        #       3906764800 blocks super 1.2 512k chunks
        updated = _with_detail(current, line)
        if updated is not current:
            arrays[-1] = current = updated
    return arrays


def parse_sync_completed(text: str | None) -> tuple[int, int] | None:
    """Parse ``sync_completed`` (``"1234 / 5678"`` sectors; ``none``/``delayed`` -> ``None``)."""
    if text is None:
        return None
    done, sep, total = text.partition("/")
    try:
        return (int(done), int(total)) if sep else None
    except ValueError:
        return None


def parse_member_state(text: str | None) -> tuple[str, ...]:
    """Split a member's sysfs ``state`` (``in_sync,write_mostly``) into words."""
    return tuple(w for w in (text or "").split(",") if w)


def _int_or_none(text: str | None) -> int | None:
    try:
        return None if text is None else int(text.split()[0])
    except (ValueError, IndexError):
        return None


@dataclass(frozen=True, slots=True)
class MemberFacts:
    """What the collector knows about one member before deciding its role."""

    name: str
    mdstat: MdstatMember | None
    flags: tuple[str, ...]
    slot: int | None
    present: bool


def member_role(m: MemberFacts) -> RaidMemberRole:
    """Decide a member's role from mdstat flags and sysfs state.

    sysfs prints ``spare`` for any member that is neither faulty, journal nor in sync,
    which includes a member being rebuilt into a slot; the slot tells them apart.
    """
    flags = set(m.flags)
    ms = m.mdstat
    if "journal" in flags or (ms is not None and ms.journal):
        return "journal"
    if "faulty" in flags or (ms is not None and ms.faulty):
        return "faulty"
    if not m.present:
        return "missing"
    if "in_sync" in flags:
        return "in_sync"
    if flags:
        return "rebuilding" if m.slot is not None else "spare"
    if ms is not None and ms.spare:
        return "spare"
    return "in_sync" if ms is not None else "unknown"


def array_health(mdstat_state: str, array_state: str | None, level: str | None, degraded: int | None,
                 sync_action: str | None, members: Sequence[RaidMemberReading]) -> RaidHealth:
    """Summarise an array: inactive, broken, recovering, degraded or ok.

    A RAID0/linear array with a member missing or faulty is broken even on kernels that
    still print ``active`` (before the ``broken`` state existed).
    """
    if mdstat_state == "inactive" or array_state in ("inactive", "clear"):
        return "inactive"
    if mdstat_state == "broken" or array_state == "broken":
        return "broken"
    lost = [m for m in members if m.role in ("faulty", "missing")]
    if level in STRIPED_LEVELS and lost:
        return "broken"
    if (degraded or 0) > 0 or lost:
        rebuilding = any(m.role == "rebuilding" for m in members)
        return "recovering" if sync_action in ("recover", "reshape") or rebuilding else "degraded"
    return "ok"


def imbalance_pct(rates: Sequence[float], min_busy: float) -> float | None:
    """How far the slowest lags the fastest, in percent of the fastest; ``None`` if idle or alone."""
    if len(rates) < 2 or max(rates) < max(min_busy, 1e-9):
        return None
    return round((max(rates) - min(rates)) / max(rates) * 100.0, 1)


def parse_md_links(links: dict[str, str | None]) -> dict[str, str]:
    """Map kernel names to /dev/md names from the symlinks of /dev/md (``raid0n0 -> ../md127``)."""
    out: dict[str, str] = {}
    for name, target in sorted(links.items()):
        if target:
            out.setdefault(target.rstrip("/").rsplit("/", 1)[-1], name)
    return out


@dataclass(frozen=True, slots=True)
class ArrayFacts:
    """What does not change about an array while its geometry stays (read once, see `DeviceFacts`)."""

    md_name: str | None
    level: str | None
    raid_disks: int | None
    chunk_bytes: int | None
    uuid: str | None


_HEALTH_SEVERITY = {"ok": "info", "recovering": "warning", "degraded": "critical",
                    "broken": "critical", "inactive": "warning"}


class RaidCollector(PolledCollector):
    """md arrays: state, members, sync progress, throughput and balance.

    Each array's /dev/md name, level, disk count, chunk size and UUID are read once (see
    `DeviceFacts`): again when the arrays or their geometry in /proc/mdstat change, during
    a reshape, on a udev event and every `device_facts.REFRESH_EVERY` reads.

    Args:
        root: the machine's files.
        clock: monotonic time for rates.
        balance_min_bytes_per_s: below this an array or member is idle for balance figures.
        events: udev source for immediate re-reads (``None``: polling only).
    """

    name = "raid"

    def __init__(self, root: HostRoot, clock: Clock, balance_min_bytes_per_s: float = 50e6,
                 events: UdevSource | None = None) -> None:
        self.root = root
        self.clock = clock
        self.balance_min_bytes_per_s = balance_min_bytes_per_s
        self._tracker = DiskRateTracker()
        self._lock = threading.Lock()
        self._seen: dict[str, RaidArrayReading] | None = None
        self._facts: DeviceFacts[str, ArrayFacts] = DeviceFacts()
        self._md_names: dict[str, str] = {}
        self._rescan = UdevRescan(events, ("block",), self._on_udev, "rigmon-raid-udev")

    def start(self, push: PushFn) -> None:
        self._rescan.start(push)

    def close(self) -> None:
        self._rescan.close()

    def _on_udev(self) -> Sequence[object]:
        with self._lock:
            self._facts.invalidate()
        return self.collect()

    def collect(self) -> Sequence[object]:
        with self._lock:
            return self._collect()

    def _collect(self) -> list[object]:
        text = self.root.read_text("/proc/mdstat")
        if text is None:
            raise NoData("no /proc/mdstat (md driver not loaded)")
        parsed = parse_mdstat(text)
        if not parsed and self._seen is None:
            raise NoData("no md arrays")
        now_s = self.clock.monotonic()
        stats = {s.name: s for s in parse_diskstats(self.root.read_text("/proc/diskstats") or "")}
        # The arrays as mdstat shows their geometry and members: a new, stopped, re-assembled or
        # reshaped array reads every fact again.
        self._facts.begin((a.name, a.level, a.raid_disks, a.chunk_kib, a.blocks_kib, tuple(m.name for m in a.members))
                          for a in parsed)
        if not any(self._facts.known(a.name) for a in parsed):
            self._md_names = parse_md_links({n: self.root.readlink(f"/dev/md/{n}")
                                             for n in self.root.listdir("/dev/md")})
        rates: dict[str, DiskRates] = {}
        for name, st in stats.items():
            rates[name] = self._tracker.update((name, st.major, st.minor), st, now_s)
        self._tracker.forget_missing((s.name, s.major, s.minor) for s in stats.values())
        arrays = [self._array(a, rates) for a in parsed]
        arrays = self._with_array_balance(arrays)
        records: list[object] = list(self._events(arrays))
        records.extend(arrays)
        return records

    def _array_facts(self, name: str) -> ArrayFacts:
        base = f"/sys/block/{name}/md"
        attr = self.root.read_attr
        return ArrayFacts(md_name=self._md_names.get(name), level=attr(f"{base}/level"),
                          raid_disks=_int_or_none(attr(f"{base}/raid_disks")),
                          chunk_bytes=_int_or_none(attr(f"{base}/chunk_size")), uuid=attr(f"{base}/uuid"))

    def _array(self, ms: MdstatArray, rates: dict[str, DiskRates]) -> RaidArrayReading:
        base = f"/sys/block/{ms.name}/md"
        attr = self.root.read_attr
        if ms.sync_action == "reshape":
            self._facts.forget(ms.name)
        facts = self._facts.get(ms.name, self._array_facts)
        md_name = facts.md_name
        level = facts.level or ms.level
        array_state = attr(f"{base}/array_state")
        striped = level in STRIPED_LEVELS
        # Redundancy files exist only for levels with a sync_request; their absence is normal.
        degraded = None if striped else _int_or_none(attr(f"{base}/degraded"))
        if degraded is None and not striped and ms.raid_disks is not None and ms.working_disks is not None:
            degraded = ms.raid_disks - ms.working_disks
        sync_action, pct, speed, eta = self._sync(base, ms, striped)
        members = self._members(ms, base, rates)
        raid_disks = facts.raid_disks
        chunk = facts.chunk_bytes
        md_rates = rates.get(ms.name, DiskRates())
        busy = [(m.read_bytes_per_s or 0.0) + (m.write_bytes_per_s or 0.0) for m in members
                if m.role == "in_sync" and m.read_bytes_per_s is not None]
        return RaidArrayReading(
            name=ms.name,
            md_name=md_name,
            level=level,
            health=array_health(ms.state, array_state, level, degraded, sync_action, members),
            mdstat_state=ms.state,
            array_state=array_state,
            read_only=ms.read_only is not None or array_state in ("readonly", "read-auto"),
            raid_disks=raid_disks if raid_disks is not None else ms.raid_disks,
            working_disks=ms.working_disks,
            degraded=degraded,
            sync_action=sync_action,
            sync_progress_pct=pct,
            sync_speed_bytes_per_s=speed,
            sync_eta_s=eta,
            size_bytes=None if ms.blocks_kib is None else ms.blocks_kib * KIB,
            chunk_bytes=chunk if chunk else (ms.chunk_kib * KIB if ms.chunk_kib else None),
            uuid=facts.uuid,
            members=members,
            read_bytes_per_s=md_rates.read_bytes_per_s,
            write_bytes_per_s=md_rates.write_bytes_per_s,
            member_imbalance_pct=imbalance_pct(busy, self.balance_min_bytes_per_s),
            vs_fastest_array_pct=None,
        )

    def _sync(self, base: str, ms: MdstatArray, striped: bool
              ) -> tuple[str | None, float | None, float | None, float | None]:
        """Sync action, progress %, speed (bytes/s) and ETA (s), sysfs first, mdstat as fallback."""
        if striped:
            return None, None, None, None
        action = self.root.read_attr(f"{base}/sync_action") or ms.sync_action
        if action is None or action == "idle":
            return action, None, None, None
        pct = ms.sync_pct
        remaining_bytes = None
        done_total = parse_sync_completed(self.root.read_attr(f"{base}/sync_completed"))
        if done_total is not None and done_total[1] > 0:
            pct = round(done_total[0] / done_total[1] * 100.0, 1)
            remaining_bytes = (done_total[1] - done_total[0]) * SECTOR_BYTES
        elif ms.sync_done_kib is not None and ms.sync_total_kib is not None:
            remaining_bytes = (ms.sync_total_kib - ms.sync_done_kib) * KIB
        speed_kib = _int_or_none(self.root.read_attr(f"{base}/sync_speed"))
        if speed_kib is None:
            speed_kib = ms.sync_speed_kib_per_s
        speed = None if speed_kib is None else float(speed_kib * KIB)
        eta = None
        if speed and remaining_bytes is not None:
            eta = round(remaining_bytes / speed, 1)
        elif ms.sync_finish_min is not None:
            eta = ms.sync_finish_min * 60.0
        return action, pct, speed, eta

    def _members(self, ms: MdstatArray, base: str, rates: dict[str, DiskRates]) -> tuple[RaidMemberReading, ...]:
        by_name = {m.name: m for m in ms.members}
        names = list(by_name)
        for entry in self.root.listdir(base):
            if entry.startswith("dev-") and entry[4:] not in by_name:
                names.append(entry[4:])
        out = []
        for name in names:
            dev = f"{base}/dev-{name}"
            has_sysfs = self.root.exists(dev)
            slot = _int_or_none(self.root.read_attr(f"{dev}/slot")) if has_sysfs else None
            mstat = by_name.get(name)
            if slot is None and mstat is not None and not has_sysfs and not mstat.spare:
                slot = mstat.desc_nr
            flags = parse_member_state(self.root.read_attr(f"{dev}/state")) if has_sysfs else ()
            # A member whose block device went away (enclosure unplugged) stays listed by md:
            # its ``block`` link dangles, and its block device is gone from /sys/block.
            if has_sysfs and self.root.readlink(f"{dev}/block") is not None:
                present = self.root.exists(f"{dev}/block")
            else:
                present = self.root.exists(f"/sys/class/block/{name}") or self.root.exists(f"/sys/block/{name}") \
                    or name in rates
            facts = MemberFacts(name=name, mdstat=mstat, flags=flags, slot=slot, present=present)
            r = rates.get(name, DiskRates()) if present else DiskRates()
            out.append(RaidMemberReading(
                name=name,
                slot=slot,
                role=member_role(facts),
                present=present,
                write_mostly="write_mostly" in flags or (mstat is not None and mstat.write_mostly),
                replacement="replacement" in flags or (mstat is not None and mstat.replacement),
                flags=flags,
                errors_total=_int_or_none(self.root.read_attr(f"{dev}/errors")) if has_sysfs else None,
                read_bytes_per_s=r.read_bytes_per_s,
                write_bytes_per_s=r.write_bytes_per_s,
            ))
        return tuple(sorted(out, key=lambda m: (m.slot is None, m.slot if m.slot is not None else 0, m.name)))

    def _with_array_balance(self, arrays: list[RaidArrayReading]) -> list[RaidArrayReading]:
        """Compare arrays loaded at the same time: each busy one as a share of the fastest."""
        totals = {a.name: (a.read_bytes_per_s or 0.0) + (a.write_bytes_per_s or 0.0) for a in arrays
                  if a.read_bytes_per_s is not None}
        busy = {n: t for n, t in totals.items() if t >= max(self.balance_min_bytes_per_s, 1e-9)}
        if len(busy) < 2:
            return arrays
        fastest = max(busy.values())
        out = []
        for a in arrays:
            share = round(busy[a.name] / fastest * 100.0, 1) if a.name in busy else None
            out.append(dataclasses.replace(a, vs_fastest_array_pct=share))
        return out

    def _events(self, arrays: list[RaidArrayReading]) -> list[EventDraft]:
        now = {a.name: a for a in arrays}
        seen = self._seen
        self._seen = now
        out: list[EventDraft] = []
        for a in arrays:
            subject = f"md:{a.name}"
            label = f"{a.name} ({a.md_name})" if a.md_name else a.name
            before = None if seen is None else seen.get(a.name)
            if seen is not None and before is None:
                out.append(EventDraft("raid_array_added", "info", subject,
                                      f"md array {label} appeared: {a.level or '?'} {a.health}",
                                      {"level": a.level, "health": a.health}))
            old_health = before.health if before is not None else None
            if a.health != (old_health or "ok"):
                change = f"{old_health} -> {a.health}" if old_health else f"is {a.health}"
                out.append(EventDraft(
                    "raid_health_changed", _HEALTH_SEVERITY[a.health], subject,
                    f"md array {label} {change}" + (f" (array_state {a.array_state})" if a.array_state else ""),
                    {"from": old_health, "to": a.health, "array_state": a.array_state, "degraded": a.degraded},
                ))
            old_members = {m.name: m for m in before.members} if before is not None else {}
            for m in a.members:
                old = old_members.get(m.name)
                if old is not None and old.role != m.role:
                    sev = "critical" if m.role in ("faulty", "missing") else "info"
                    out.append(EventDraft("raid_member_changed", sev, subject,
                                          f"{label} member {m.name} {old.role} -> {m.role}",
                                          {"member": m.name, "from": old.role, "to": m.role}))
            if before is not None and a.sync_action != before.sync_action:
                out.append(EventDraft("raid_sync_changed", "info", subject,
                                      f"{label} sync {before.sync_action or 'none'} -> {a.sync_action or 'none'}",
                                      {"from": before.sync_action, "to": a.sync_action}))
        for name, gone in (seen or {}).items():
            if name not in now:
                out.append(EventDraft("raid_array_removed", "warning", f"md:{name}",
                                      f"md array {name} disappeared", {"md_name": gone.md_name}))
        return out


def make_raid_collector(ctx: CollectorContext) -> RaidCollector:
    """Registry factory."""
    cfg = ctx.config.storage
    events = open_udev_source(("block",)) if cfg.udev and ctx.root.is_real_root else None
    return RaidCollector(ctx.root, ctx.clock, cfg.balance_min_bytes_per_s, events)
