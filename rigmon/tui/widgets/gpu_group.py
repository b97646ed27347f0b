"""GpuGroup: the node screen's box for GPU readings (power, clocks, temperatures, bus state per GPU)."""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType

from rigmon.schema import Frame
from rigmon.tui.widgets.source_group import SourceGroup


class GpuGroup(SourceGroup):
    """GPU readings (power, clocks, temperatures, bus state per GPU).

    Shows "not present" until the schema carries GPU readings: `body` is where they
    get drawn once `Readings` has them.
    """

    TITLE: ClassVar[str] = "GPUs"
    COLLECTORS: ClassVar[tuple[str, ...]] = ("gpu",)

    def body(self, frame: Frame) -> RenderableType | None:
        """Nothing yet: frames carry no GPU readings in this schema version."""
        return None
