"""RAID collector: md arrays from /proc/mdstat and /sys/block/mdX/md, with member throughput balance."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from rigmon.clock import Clock
from rigmon.collectors.base import (
    CollectorContext,
    CollectorError,
    EventDraft,
    NoData,
    PolledCollector,
    PushFn,
)
from rigmon.collectors.device_facts import DeviceFacts
from rigmon.collectors.disks import NO_RATES, DiskRates, DiskRateTracker, parse_diskstats
from rigmon.collectors.mdstat import (
    STRIPED_LEVELS,
    MdstatArray,
    MdstatError,
    MdstatMember,
    can_serve_data,
    is_container,
    parse_mdstat,
    parse_sync_completed,
)
from rigmon.collectors.raid_unread import mdstat_unread
from rigmon.collectors.sysfs_values import parse_int
from rigmon.collectors.udev_rescan import UdevRescan
from rigmon.hw.names import TextNames, text_name
from rigmon.hw.root import HostRoot
from rigmon.hw.udev import UdevEvent, UdevSource, open_udev_source
from rigmon.schema import (
    RaidArrayReading,
    RaidHealth,
    RaidMemberReading,
    RaidMemberRole,
)

KIB = 1024
SECTOR_BYTES = 512

def parse_member_state(text: str | None) -> tuple[str, ...]:
    """Split a member's sysfs ``state`` (``in_sync,write_mostly``) into words."""
    return tuple(w for w in (text or "").split(",") if w)


def _int_or_none(text: str | None) -> int | None:
    words = (text or "").split()
    return parse_int(words[0]) if words else None


class MemberFacts(msgspec.Struct, frozen=True, gc=False):
    """What the collector knows about one member before deciding its role."""

    name: str
    mdstat: MdstatMember | None
    flags: tuple[str, ...]
    slot: int | None
    present: bool


def member_role(m: MemberFacts) -> RaidMemberRole:
    """Decide a member's role from mdstat flags and sysfs state.

    sysfs prints ``spare`` for any member that is neither faulty, journal nor in sync,
    which includes a member being rebuilt into a slot; the slot tells them apart. Without
    sysfs state, mdstat's recovery line and ``[U_]`` tell a member being rebuilt.
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
    if ms is not None and ms.rebuilding:
        return "rebuilding"  # no sysfs state: mdstat's recovery says it (see `rebuilding_members`)
    return "in_sync" if ms is not None else "unknown"


def array_health(mdstat_state: str, array_state: str | None, level: str | None, degraded: int | None,
                 sync_action: str | None, members: Sequence[RaidMemberReading],
                 serves_data: bool | None = None, container: bool = False) -> RaidHealth:
    """Summarise an array: inactive, broken, recovering, degraded or ok.

    A RAID0/linear array with a member missing or faulty is broken even on kernels that
    still print ``active`` (before the ``broken`` state existed); so is a redundant array
    with fewer working members than its level needs (``serves_data`` false: a raid5 at
    ``[4/0]``), which older kernels also print as ``active``. An external-metadata container
    (``container``, see `is_container`) is never started, so it is ``ok``: its volumes are
    judged as arrays of their own, and a member it lost is ``missing`` like any other.
    """
    if container:
        return "ok"
    if mdstat_state == "inactive" or array_state in ("inactive", "clear"):
        return "inactive"
    if mdstat_state == "broken" or array_state == "broken" or serves_data is False:
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


#: Block devices that are never an md array or one of its members: their events re-read nothing.
_NEVER_MD = ("loop", "ram", "zram", "sr", "fd")


def concerns_arrays(event: UdevEvent) -> bool:
    """Whether a block device's event may concern md (not a loop, RAM, zram, optical or floppy device)."""
    return not event.sys_name.startswith(_NEVER_MD)


@dataclass(frozen=True, slots=True)
class ArrayFacts:
    """What does not change about an array while its geometry stays (read once, see `DeviceFacts`).

    ``name`` and ``md_name`` are as records carry them (`rigmon.hw.names.text_name`): a name
    given in bytes that are not UTF-8 keeps them as ``\\xNN``; paths use the kernel's name.
    """

    name: str
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
        #: Member names as records carry them, worked out once per name.
        self._member_names = TextNames()
        self._sysfs = True
        self._known_devices: set[str] | None = None
        self._rescan = UdevRescan(events, ("block",), self._on_udev, "rigmon-raid-udev", wants=concerns_arrays)

    def start(self, push: PushFn) -> None:
        self._rescan.start(push)

    def close(self) -> None:
        self._rescan.close()

    def _on_udev(self, _events: Sequence[UdevEvent]) -> Sequence[object]:
        with self._lock:
            self._facts.invalidate()
        try:
            return self.collect()
        except CollectorError:
            # Nothing pushed: the tick's own call fails the same way and says why (no traceback per event).
            return ()

    def collect(self) -> Sequence[object]:
        with self._lock:
            return self._collect()

    def _collect(self) -> list[object]:
        # mdstat reads the same from one tick to the next unless an array changes: its parse is
        # reused then, as the disk collector's parse of /proc/diskstats is in the same tick. Both
        # name devices as the kernel does, in any bytes: read as /sys and /dev list them, so that
        # the names find their paths and each other (records carry them as `text_name` gives).
        try:
            parsed = self.root.read_parsed("/proc/mdstat", parse_mdstat, errors="surrogateescape")
        except MdstatError as exc:
            raise CollectorError(f"/proc/mdstat: {exc}") from None
        if parsed is None:
            # The arrays last read stay (`_seen` too: what changed meanwhile is said when it is back).
            raise mdstat_unread(self.root, (self._seen or {}).values())
        if not parsed and self._seen is None:
            raise NoData("no md arrays")
        now_s = self.clock.monotonic()
        diskstats = self.root.read_parsed("/proc/diskstats", parse_diskstats, errors="surrogateescape")
        stats = {s.name: s for s in diskstats.disks} if diskstats is not None else {}
        # Without /sys (a container that does not mount it) nothing says a member's block
        # device is gone; /proc/diskstats still lists every device the kernel has.
        self._sysfs = self.root.exists("/sys/block") or self.root.exists("/sys/class/block")
        self._known_devices = set(stats) | set(diskstats.partial) if diskstats is not None and (
            diskstats.disks or diskstats.partial or diskstats.skipped) else None
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
        shares = self._array_shares([a.name for a in parsed], rates)
        arrays = [self._array(a, rates, shares.get(a.name)) for a in parsed]
        records: list[object] = list(self._events(arrays))
        records.extend(arrays)
        return records

    def _array_facts(self, name: str) -> ArrayFacts:
        base = f"/sys/block/{name}/md"
        attr = self.root.read_attr
        md_name = self._md_names.get(name)
        return ArrayFacts(name=text_name(name), md_name=None if md_name is None else text_name(md_name),
                          level=attr(f"{base}/level") or None,
                          raid_disks=_int_or_none(attr(f"{base}/raid_disks")),
                          chunk_bytes=_int_or_none(attr(f"{base}/chunk_size")), uuid=attr(f"{base}/uuid") or None)

    def _array(self, ms: MdstatArray, rates: dict[str, DiskRates], vs_fastest_pct: float | None
               ) -> RaidArrayReading:
        base = f"/sys/block/{ms.name}/md"
        attr = self.root.read_attr
        if ms.sync_action == "reshape":
            self._facts.forget(ms.name)
        facts = self._facts.get(ms.name, self._array_facts)
        md_name = facts.md_name
        level = facts.level or ms.level
        # An empty file is no state (not present), as an unreadable one.
        array_state = attr(f"{base}/array_state") or None
        striped = level in STRIPED_LEVELS
        inactive = ms.state == "inactive" or array_state in ("inactive", "clear")
        # The disk count the array needs: sysfs raid_disks (empty while it is unknown, e.g. an
        # inactive array still being assembled), else the kernel's [n/m].
        raid_disks = facts.raid_disks if facts.raid_disks is not None else ms.raid_disks
        # Redundancy files exist only for levels with a sync_request; their absence is normal.
        degraded = None if striped or inactive else _int_or_none(attr(f"{base}/degraded"))
        if degraded is None and not striped and not inactive and ms.raid_disks is not None \
                and ms.working_disks is not None:
            degraded = ms.raid_disks - ms.working_disks
        working = ms.working_disks
        if working is None and inactive:
            # Nothing runs in an array that is not started: no member works for it.
            working = 0
        elif working is None and degraded is not None and raid_disks is not None:
            working = raid_disks - degraded
        sync_action, pct, speed, eta = self._sync(base, ms, striped or inactive)
        members = self._members(ms, base, rates)
        chunk = facts.chunk_bytes
        md_rates = rates.get(ms.name, NO_RATES)
        busy = [(m.read_bytes_per_s or 0.0) + (m.write_bytes_per_s or 0.0) for m in members
                if m.role == "in_sync" and m.read_bytes_per_s is not None]
        serves = None if striped or inactive else can_serve_data(
            level, ms.raid_disks if ms.raid_disks is not None else raid_disks, working, ms.member_status,
            ms.near_copies, ms.far_copies)
        return RaidArrayReading(
            name=facts.name,
            md_name=md_name,
            level=level,
            health=array_health(ms.state, array_state, level, degraded, sync_action, members, serves,
                                is_container(facts.level, ms.metadata)),
            mdstat_state=ms.state,
            array_state=array_state,
            read_only=ms.read_only is not None or array_state in ("readonly", "read-auto"),
            raid_disks=raid_disks,
            working_disks=working,
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
            vs_fastest_array_pct=vs_fastest_pct,
        )

    def _sync(self, base: str, ms: MdstatArray, no_sync: bool
              ) -> tuple[str | None, float | None, float | None, float | None]:
        """Sync action, progress %, speed (bytes/s) and ETA (s).

        The kernel's own ``finish=`` and ``speed=`` of /proc/mdstat are shown when it prints
        them (its estimate is smoothed over the resync window); an ETA is computed from the
        remaining sectors and the current speed only when it does not.
        """
        if no_sync:
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
        speed_kib = ms.sync_speed_kib_per_s
        if speed_kib is None:
            speed_kib = _int_or_none(self.root.read_attr(f"{base}/sync_speed"))
        speed = None if speed_kib is None else float(speed_kib * KIB)
        if ms.sync_finish_min is not None:
            eta: float | None = round(ms.sync_finish_min * 60.0, 1)
        elif speed and remaining_bytes is not None:
            eta = round(remaining_bytes / speed, 1)
        else:
            eta = None
        return action, pct, speed, eta

    def _present(self, name: str, dev: str, has_sysfs: bool, rates: dict[str, DiskRates]) -> bool:
        """Whether a member's block device is there; ``True`` when nothing says it is gone."""
        # A member whose block device went away (enclosure unplugged) stays listed by md:
        # its ``block`` link dangles, and its block device is gone from /sys/block.
        if has_sysfs:
            if self.root.exists(f"{dev}/block"):
                return True
            if self.root.readlink(f"{dev}/block") is not None:
                return False  # the link dangles
        if self._sysfs:
            return self.root.exists(f"/sys/class/block/{name}") or self.root.exists(f"/sys/block/{name}") \
                or name in rates
        # No /sys: /proc/diskstats lists every block device the kernel has; without it too,
        # presence is unknown and a member is not called missing.
        return self._known_devices is None or name in self._known_devices

    def _members(self, ms: MdstatArray, base: str, rates: dict[str, DiskRates]) -> tuple[RaidMemberReading, ...]:
        names = [m.name for m in ms.members]
        listed = set(names)
        # The same name twice (a faulty member and its re-added spare) keeps both: sysfs has
        # one dev-<name> directory for them, so their roles come from mdstat alone.
        twice = set() if len(listed) == len(names) else {n for n, count in Counter(names).items() if count > 1}
        entries: list[tuple[str, MdstatMember | None]] = [(m.name, m) for m in ms.members]
        # Member directories (dev-<name>) as listed: whether a member has one, without a stat each.
        in_sysfs = {entry[4:] for entry in self.root.listdir(base) if entry.startswith("dev-")}
        entries.extend((name, None) for name in sorted(in_sysfs) if name not in listed)
        out = []
        # Presence once per name: a garbled line can list one name thousands of times, and two
        # stats per entry made such a tick cost tens of milliseconds.
        presence: dict[tuple[str, bool], bool] = {}
        for name, mstat in entries:
            dev = f"{base}/dev-{name}"
            has_sysfs = name not in twice and name in in_sysfs
            # Only sysfs knows the slot: mdstat's [n] is the member's descriptor number, which is its
            # slot only while nothing was added or failed (md6 : active raid1 sdb2[2] sda2[0], [2/1]:
            # sdb2 rebuilds into slot 1). Without ``dev-*/slot`` the slot is unknown; ``device`` keeps [n].
            slot = _int_or_none(self.root.read_attr(f"{dev}/slot")) if has_sysfs else None
            flags = parse_member_state(self.root.read_attr(f"{dev}/state")) if has_sysfs else ()
            present = presence.get((name, has_sysfs))
            if present is None:
                present = presence[name, has_sysfs] = self._present(name, dev, has_sysfs, rates)
            facts = MemberFacts(name=name, mdstat=mstat, flags=flags, slot=slot, present=present)
            r = rates.get(name, NO_RATES) if present else NO_RATES
            out.append(RaidMemberReading(
                name=self._member_names(name),
                slot=slot,
                role=member_role(facts),
                present=present,
                write_mostly="write_mostly" in flags or (mstat is not None and mstat.write_mostly),
                replacement="replacement" in flags or (mstat is not None and mstat.replacement),
                flags=flags,
                errors_total=_int_or_none(self.root.read_attr(f"{dev}/errors")) if has_sysfs else None,
                read_bytes_per_s=r.read_bytes_per_s,
                write_bytes_per_s=r.write_bytes_per_s,
                device=None if mstat is None else mstat.desc_nr,
            ))
        return tuple(sorted(out, key=_member_order))

    def _array_shares(self, names: list[str], rates: dict[str, DiskRates]) -> dict[str, float]:
        """Compare arrays loaded at the same time: each busy one's throughput as a share of the
        fastest, in percent (found before the readings are made, so none is copied to add it)."""
        totals = {}
        for name in names:
            r = rates.get(name)
            if r is not None and r.read_bytes_per_s is not None:
                totals[name] = r.read_bytes_per_s + (r.write_bytes_per_s or 0.0)
        busy = {n: t for n, t in totals.items() if t >= max(self.balance_min_bytes_per_s, 1e-9)}
        if len(busy) < 2:
            return {}
        fastest = max(busy.values())
        return {n: round(t / fastest * 100.0, 1) for n, t in busy.items()}

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
            old_members = _members_by_key(before.members) if before is not None else {}
            for key, m in _members_by_key(a.members).items():
                old = old_members.get(key)
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


def _member_order(m: RaidMemberReading) -> tuple[bool, int, bool, int, str, str]:
    """Members by slot, then those without one by their descriptor number (mdadm's ``Number``)."""
    return (m.slot is None, m.slot or 0, m.device is None, m.device or 0, m.name, m.role)


def _members_by_key(members: Sequence[RaidMemberReading]) -> dict[object, RaidMemberReading]:
    """Members by name; a name listed twice by its descriptor number as well, so both are followed."""
    by_name: dict[object, RaidMemberReading] = {m.name: m for m in members}
    if len(by_name) == len(members):
        return by_name  # no name twice (the usual case)
    names = Counter(m.name for m in members)
    return {(m.name if names[m.name] == 1 else (m.name, m.device, m.role)): m for m in members}


def make_raid_collector(ctx: CollectorContext) -> RaidCollector:
    """Registry factory."""
    cfg = ctx.config.storage
    events = open_udev_source(("block",)) if cfg.udev and ctx.root.is_real_root else None
    return RaidCollector(ctx.root, ctx.clock, cfg.balance_min_bytes_per_s, events)
