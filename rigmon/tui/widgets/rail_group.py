"""RailGroup: the node screen's box for 12 V rail readings from the ADC (min/mean/max volts per window, current)."""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType

from rigmon.schema import Frame
from rigmon.tui.widgets.source_group import SourceGroup


class RailGroup(SourceGroup):
    """12 V rail readings from the ADC (min/mean/max volts per window, current).

    Shows "not present" until the schema carries PSU readings: `body` is where they
    get drawn once `Readings` has them.
    """

    TITLE: ClassVar[str] = "PSU rail"
    COLLECTORS: ClassVar[tuple[str, ...]] = ("psu",)

    def body(self, frame: Frame) -> RenderableType | None:
        """Nothing yet: frames carry no PSU readings in this schema version."""
        return None
