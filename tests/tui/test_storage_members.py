"""The storage box's md member rows: a member's slot, or its superblock number where md gives no slot."""

from __future__ import annotations

from msgspec.structs import replace

from rigmon.schema import Frame, RaidMemberReading
from rigmon.tui.widgets.storage_group import member_number
from tests.tui.snapshot_apps.record_frames import load_frames
from tests.tui.storage_box import storage_lines


def _numbered(frame: Frame) -> Frame:
    """``frame`` as a new agent reports it: mdstat's ``[n]`` in ``device``; the second member
    has no slot (md sysfs gives none), so only its device number (2) is known."""
    array = frame.readings.raid[0]
    first, second = array.members
    members = (replace(first, device=0), replace(second, slot=None, device=2))
    raid = (replace(array, members=members),)
    return replace(frame, readings=replace(frame.readings, raid=raid))


def _member(slot: int | None, device: int | None) -> RaidMemberReading:
    return RaidMemberReading(name="sdb2", slot=slot, role="spare", present=True, write_mostly=False,
                             replacement=False, flags=(), errors_total=None, read_bytes_per_s=None,
                             write_bytes_per_s=None, device=device)


def test_member_number_is_the_slot_else_the_device_number_apart() -> None:
    assert member_number(_member(1, 2)) == "[1]"
    assert member_number(_member(None, 2)) == " #2"
    assert member_number(_member(None, None)) == ""


async def test_a_member_without_slot_shows_its_device_number_not_as_a_slot() -> None:
    frames = [_numbered(f) for f in load_frames("raid1-member-failed-recovering")[:40]]
    async for width, lines in storage_lines([("raid", frames, 40)]):
        assert any("└ nvme0n1[0]" in line for line in lines), (width, lines)
        assert any("└ nvme2n1 #2" in line for line in lines), (width, lines)
        assert not any("nvme2n1[" in line or "…" in line for line in lines), (width, lines)
