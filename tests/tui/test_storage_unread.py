"""The storage box while the agent cannot read /proc/mdstat: an array's health is "unknown", with the last one
read beside it, greyed; not the last health shown as now's."""

from __future__ import annotations

from msgspec.structs import replace

from rigmon.collectors.raid_unread import unread_array
from rigmon.schema import CollectorStatus, Frame, raid_unknown
from rigmon.tui.widgets.storage_group import health_text
from tests.tui.snapshot_apps.record_frames import load_frames
from tests.tui.storage_box import storage_lines

#: The raid collector's error while /proc/mdstat is gone (`rigmon.collectors.raid_unread.mdstat_unread`).
UNREAD_ERROR = ("md status unreadable: /proc/mdstat is gone (md driver unloaded, or /proc no longer mounted where "
                "the agent runs); the 1 array last read (md127) listed with their state unknown")


def _unread(frame: Frame, last_read: Frame) -> Frame:
    """``frame`` as the agent sends it once /proc/mdstat is gone after ``last_read``: the arrays last read as the
    raid collector lists them then (`unread_array`), the collector in error."""
    raid = tuple(unread_array(a) for a in last_read.readings.raid)
    collectors = {**frame.collectors, "raid": CollectorStatus(state="error", ok=False, error=UNREAD_ERROR)}
    return replace(frame, readings=replace(frame.readings, raid=raid), collectors=collectors)


def test_an_unread_arrays_health_is_unknown_with_the_last_one_read() -> None:
    array = load_frames("raid1-member-failed-recovering")[20].readings.raid[0]
    assert not raid_unknown(array) and not health_text(array).startswith("unknown")
    unread = unread_array(array)
    assert raid_unknown(unread) and unread.health == "unknown" and unread.health_last_read == array.health
    assert health_text(unread) == f"unknown (last {array.health})"
    # Still unreadable at the next poll: the health last read stays the one md gave.
    assert health_text(unread_array(unread)) == f"unknown (last {array.health})"


async def test_the_storage_box_says_unknown_for_an_array_md_cannot_read() -> None:
    frames = load_frames("raid1-member-failed-recovering")[:40]
    last_health = frames[29].readings.raid[0].health
    frames = frames[:30] + [_unread(f, frames[29]) for f in frames[30:]]
    async for width, lines in storage_lines([("raid", frames, 40)]):
        row = next(line for line in lines if "md127" in line)
        assert "unknown (last" in row, (width, lines)
        assert f"{last_health})" in " ".join(lines), (width, lines)  # wrapped in its column at 80
        # The members' roles are not read now either.
        assert any("└ nvme0n1" in line and "unknown" in line for line in lines), (width, lines)
