"""md arrays while /proc/mdstat cannot be read: listed as last read, every reading of now unknown, and why."""

from __future__ import annotations

from collections.abc import Iterable

from msgspec.structs import replace

from rigmon.collectors.base import CollectorError, NoData
from rigmon.hw.root import HostRoot
from rigmon.schema import RAID_UNKNOWN, RaidArrayReading, RaidMemberReading

MDSTAT = "/proc/mdstat"


def unread_member(member: RaidMemberReading) -> RaidMemberReading:
    """``member`` as last read, its role and every reading of now unknown (its name, slot and number kept)."""
    return replace(member, role=RAID_UNKNOWN, flags=(), errors_total=None, read_bytes_per_s=None,
                   write_bytes_per_s=None)


def unread_array(array: RaidArrayReading) -> RaidArrayReading:
    """``array`` as last read, with every reading of now unknown: its identity and geometry stay (name,
    ``/dev/md`` name, level, disks, size, chunk, UUID, members), its health, ``mdstat_state`` and member
    roles are ``unknown`` (`RAID_UNKNOWN`), its other states and rates ``null``.

    The health it had is ``health_last_read``: said beside the unknown one, not taken for now's. The md
    alarms give no verdict on ``unknown`` (their rules' ``unknown_values``): one firing holds, none starts.
    """
    last = array.health_last_read if array.health == RAID_UNKNOWN else array.health
    return replace(array, health=RAID_UNKNOWN, health_last_read=last, mdstat_state=RAID_UNKNOWN,
                   array_state=None, working_disks=None, degraded=None,
                   sync_action=None, sync_progress_pct=None, sync_speed_bytes_per_s=None, sync_eta_s=None,
                   read_bytes_per_s=None, write_bytes_per_s=None, member_imbalance_pct=None,
                   vs_fastest_array_pct=None, members=tuple(unread_member(m) for m in array.members))


def mdstat_unread(root: HostRoot, last_read: Iterable[RaidArrayReading]) -> NoData | CollectorError:
    """What to raise when /proc/mdstat reads nothing: why, with the arrays last read.

    A machine without the file that never listed an array has no md (a quiet absence). The file gone
    after arrays were read (md unloaded, a container that lost /proc), or there but not readable, is the
    md status unreadable: an error whose records are those arrays (`unread_array`), so that they do not
    vanish from the frames as if there had never been any.
    """
    kept = [unread_array(a) for a in last_read]
    there = root.exists(MDSTAT)
    if not kept and not there:
        return NoData(f"no {MDSTAT} (md driver not loaded)")
    why = ("cannot be read" if there else
           "is gone (md driver unloaded, or /proc no longer mounted where the agent runs)")
    listed = (f"; the {len(kept)} array{'s' if len(kept) != 1 else ''} last read "
              f"({', '.join(a.name for a in kept)}) listed with their state unknown") if kept else ""
    return CollectorError(f"md status unreadable: {MDSTAT} {why}{listed}", records=kept)
