"""The storage box of a node whose md arrays hold partitions (drives partitioned before ``mdadm --create``):
each member is named as md names it (``nvme0n1p1``), whole, with its throughput, at 80 columns too."""

from __future__ import annotations

from rigmon.tui.widgets.storage_group import StorageGroup
from tests.tui.snapshot_apps.recorded import build, open_node, settle
from tests.tui.test_sources import text


async def test_partition_members_are_named_whole_with_their_throughput() -> None:
    app, fleet, _ = build([("strix", "nvme-partitioned-thermal-throttle", 85)])
    async with app.run_test(size=(80, 40)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, next(iter(fleet.agents)), pilot)
        for width in (80, 200):
            await pilot.resize_terminal(width, 40)
            await pilot.pause()
            await pilot.pause()
            group = app.screen.query_one(StorageGroup)
            lines = text(group.query_one("#body").content,  # type: ignore[attr-defined]
                         group.content_size.width).splitlines()
            for member in ("nvme0n1p1[0]", "nvme1n1p1[1]", "nvme2n1p1[0]", "nvme3n1p1[1]"):
                row = next((line for line in lines if f"└ {member}" in line), None)
                assert row is not None, (width, member, lines)
                assert "in_sync" in row and "/s" in row, (width, row)
