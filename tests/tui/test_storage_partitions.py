"""The storage box of a node whose md arrays hold partitions (drives partitioned before ``mdadm --create``):
each member is named as md names it (``nvme0n1p1``), whole, with its throughput, at 80 columns too."""

from __future__ import annotations

from tests.tui.storage_box import storage_lines


async def test_partition_members_are_named_whole_with_their_throughput() -> None:
    async for width, lines in storage_lines([("strix", "nvme-partitioned-thermal-throttle", 85)]):
        for member in ("nvme0n1p1[0]", "nvme1n1p1[1]", "nvme2n1p1[0]", "nvme3n1p1[1]"):
            row = next((line for line in lines if f"└ {member}" in line), None)
            assert row is not None, (width, member, lines)
            assert "in_sync" in row and "/s" in row, (width, row)
