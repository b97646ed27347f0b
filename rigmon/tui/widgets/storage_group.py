"""StorageGroup: the node screen's box for NVMe and md RAID readings (throughput per device and array, array state)."""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType

from rigmon.schema import Frame
from rigmon.tui.widgets.source_group import SourceGroup


class StorageGroup(SourceGroup):
    """NVMe and md RAID readings (throughput per device and array, array state).

    Shows "not present" until the schema carries storage readings: `body` is where they
    get drawn once `Readings` has them.
    """

    TITLE: ClassVar[str] = "Storage"
    COLLECTORS: ClassVar[tuple[str, ...]] = ("disks", "raid")

    def body(self, frame: Frame) -> RenderableType | None:
        """Nothing yet: frames carry no storage readings in this schema version."""
        return None
