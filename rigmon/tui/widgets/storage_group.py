"""StorageGroup: the node screen's box for md arrays (with members) and NVMe drives."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from rigmon.schema import (
    RAID_HEALTHS,
    RAID_UNKNOWN,
    Frame,
    NvmeReading,
    RaidArrayReading,
    RaidMemberReading,
    raid_last_health,
    raid_unknown,
)
from rigmon.tui import format as fmt
from rigmon.tui.text import plain
from rigmon.tui.widgets.source_group import NARROW_WIDTH, Column, Level, SourceGroup

#: Cells of each array's throughput sparkline.
SPARK_WIDTH = 10
#: An array's members lagging the fastest by more than this (percent) stand out.
IMBALANCE_WARN_PCT = 20.0
#: An array slower than this share (percent) of the fastest array loaded with it stands out.
VS_FASTEST_WARN_PCT = 80.0


def health_text(array: RaidArrayReading) -> str:
    """``degraded``; ``recovering 21%`` with its sync progress; ``unknown (last degraded)`` while md cannot be
    read: the last health is not shown as now's."""
    if array.health not in RAID_HEALTHS:
        return array.health  # a newer agent's word: shown as it is (and taken as not known: `raid_unknown`)
    if raid_unknown(array):
        return f"{RAID_UNKNOWN} (last {raid_last_health(array)})"
    health: str = array.health
    if array.sync_action and array.sync_progress_pct is not None:
        # "recovering 21%", not "recovering recover 21%"; "ok check 40%" keeps the action.
        action = "" if health.startswith(array.sync_action) else f" {array.sync_action}"
        health += f"{action} {array.sync_progress_pct:.0f}%"
    return health


def health_level(array: RaidArrayReading) -> Level | None:
    """``ok`` for a clean array, ``warn`` while it recovers, none for a health a newer agent sent that this
    version does not know, ``bad`` otherwise."""
    if array.health not in RAID_HEALTHS:
        return None
    if array.health == "ok":
        return "ok"
    return "warn" if array.health == "recovering" else "bad"


def nvme_link(drive: NvmeReading) -> str:
    """``gen4 x4 of gen4 x4``; ``lost`` when the function fell off the bus."""
    if drive.link_lost:
        return "lost"
    now = f"gen{fmt.MISSING if drive.link_gen is None else drive.link_gen} x{fmt.MISSING if drive.link_width is None else drive.link_width}"
    best = f"gen{fmt.MISSING if drive.max_link_gen is None else drive.max_link_gen} x{fmt.MISSING if drive.max_link_width is None else drive.max_link_width}"
    return f"{now} of {best}"


def nvme_hot(drive: NvmeReading) -> bool:
    """Whether a drive is at or over its warning temperature (WCTEMP): the collector's verdict
    (``temp_over_max``, which counts the drive's own warning bit), else the figures of an older agent."""
    if drive.temp_over_max is not None:
        return drive.temp_over_max
    return drive.temp_c is not None and drive.temp_max_c is not None and drive.temp_c >= drive.temp_max_c


def nvme_temp(drive: NvmeReading) -> str:
    """``41 °C``; against its warning limit when at or over it (``82 °C ≥ 81.85``: it throttles)."""
    if nvme_hot(drive) and drive.temp_max_c is not None:
        return fmt.temp_at_limit(drive.temp_c, drive.temp_max_c)
    return fmt.temp(drive.temp_c)


def nvme_link_level(drive: NvmeReading) -> Level | None:
    """The PCIe link's colour from the collector's verdict (``link_state``): ``bad`` when lost,
    ``warn`` when degraded (below what both the drive and its port can do), none when ok. A
    Gen4 drive in a Gen3 slot is ``ok``: the port is the limit, not a fault. Older agents that
    report no verdict (``unknown``) are judged by the drive's own maximum."""
    if drive.link_lost or drive.link_state == "lost":
        return "bad"
    if drive.link_state == "degraded":
        return "warn"
    if drive.link_state == "ok":
        return None
    below = (drive.link_gen is not None and drive.max_link_gen is not None and drive.link_gen < drive.max_link_gen) \
        or (drive.link_width is not None and drive.max_link_width is not None and drive.link_width < drive.max_link_width)
    return "warn" if below else None


def member_number(member: RaidMemberReading) -> str:
    """``[1]``: the member's slot in the array (sysfs); where md gives none (a spare, a faulty
    member, no md sysfs), ``#2``: its device number in the superblock (mdstat's ``[n]``, mdadm's
    ``Number``), which is not a slot; empty when neither is known."""
    if member.slot is not None:
        return f"[{member.slot}]"
    return "" if member.device is None else f" #{member.device}"


class StorageGroup(SourceGroup):
    """Total throughput (max-keeping trend); md arrays with health, state, sync progress,
    read/write throughput and their trends, member imbalance and share of the fastest
    array, each member's role and throughput; NVMe drives with PCIe link and temperature."""

    TITLE: ClassVar[str] = "Storage"
    COLLECTORS: ClassVar[tuple[str, ...]] = ("disks", "raid", "nvme")
    PARTS: ClassVar[tuple[tuple[str, str], ...]] = (("raid", "md arrays"), ("nvme", "NVMe"))

    def body(self, frame: Frame) -> RenderableType | None:
        readings = frame.readings
        if not readings.raid and not readings.nvme and not readings.disks:
            return None
        rates = [r for a in readings.raid for r in (a.read_bytes_per_s, a.write_bytes_per_s) if r is not None]
        if not readings.raid:
            rates = [r for d in readings.disks for r in (d.read_bytes_per_s, d.write_bytes_per_s) if r is not None]
        parts: list[RenderableType] = [
            self.trend("storage", "storage_bytes_per_s", "max", fmt.rate(sum(rates) if rates else None))]
        if not readings.raid:
            # Without arrays the figure is of the disks: say which (the arrays are listed below).
            disks = Table.grid(padding=(0, 1))
            disks.add_column(width=12, no_wrap=True)
            disks.add_column()
            disks.add_row(self.label("of disks"), plain(", ".join(d.name for d in readings.disks) or None))
            parts.append(disks)
        if readings.raid:
            parts.append(self._arrays(frame))
        if readings.nvme:
            parts.append(self._nvme(frame))
        return Group(*parts)

    def _arrays(self, frame: Frame) -> Table:
        # Trends go first when the box is short of room, then the RAID level; the health
        # (with its sync progress) wraps rather than squeezing the array and member names.
        columns = (Column("array"), Column("level", optional=True, priority=1), Column("health", wrap=True),
                   Column("read", True), Column("", width=SPARK_WIDTH, optional=True), Column("write", True),
                   Column("", width=SPARK_WIDTH, optional=True), Column("imbal.", True), Column("vs best", True),
                   Column("state", optional=True, priority=2))
        rows: list[list[RenderableType]] = []
        for array in frame.readings.raid:
            name = array.name if array.md_name is None or self.content_size.width < NARROW_WIDTH \
                else f"{array.name} {array.md_name}"
            unread = raid_unknown(array)
            imbalance = array.member_imbalance_pct
            share = array.vs_fastest_array_pct
            # The sysfs word says more than mdstat's (clean, active, read-auto...).
            state = array.array_state or array.mdstat_state
            if array.read_only:
                state += " ro"
            if array.raid_disks is not None and array.working_disks is not None:
                state += f" {array.working_disks}/{array.raid_disks}"
            rows.append([
                plain(name, "bold"),
                plain(array.level),
                Text(health_text(array), style=self.style_of("absent")) if unread
                else self.styled(health_text(array), health_level(array)),
                fmt.rate(array.read_bytes_per_s),
                self.sparkline(self.details.get(f"raid[{array.name}].read_bytes_per_s", ()), SPARK_WIDTH, "max"),
                fmt.rate(array.write_bytes_per_s),
                self.sparkline(self.details.get(f"raid[{array.name}].write_bytes_per_s", ()), SPARK_WIDTH, "max"),
                self.styled(fmt.pct(imbalance), "warn" if imbalance is not None and imbalance > IMBALANCE_WARN_PCT else None),
                self.styled(fmt.pct(share), "warn" if share is not None and share < VS_FASTEST_WARN_PCT else None),
                plain(state),
            ])
            for member in array.members:
                role = member.role if member.present else f"{member.role}, device gone"
                level: Level | None = None
                if member.role in ("faulty", "missing") or not member.present:
                    level = "bad"
                elif member.role == "rebuilding":
                    level = "warn"
                errors = "" if not member.errors_total else f"{member.errors_total} errors"
                shown = Text(role, style=self.style_of("absent")) if unread else self.styled(role, level)
                rows.append([self.label(f" └ {member.name}{member_number(member)}"), "", shown,
                             fmt.rate(member.read_bytes_per_s), "", fmt.rate(member.write_bytes_per_s), "",
                             "", "", self.styled(errors, "warn") if errors else ""])
        return self.table(columns, rows)

    def _nvme(self, frame: Frame) -> Table:
        columns = (Column("NVMe"), Column("model", optional=True), Column("state"), Column("PCIe link"),
                   Column("temp", True), Column("namespaces", optional=True))
        rows: list[list[RenderableType]] = []
        for drive in frame.readings.nvme:
            rows.append([
                plain(drive.name),
                plain(drive.model),
                self.styled(drive.state or fmt.MISSING, None if drive.state in (None, "live") else "bad"),
                self.styled(nvme_link(drive), nvme_link_level(drive)),
                self.styled(nvme_temp(drive), "warn" if nvme_hot(drive) else None),
                plain(" ".join(drive.namespaces) or None),
            ])
        return self.table(columns, rows)
