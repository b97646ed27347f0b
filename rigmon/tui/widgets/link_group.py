"""LinkGroup: the node screen's box for Thunderbolt/USB4 link readings (speed, lanes, state per link)."""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType

from rigmon.schema import Frame
from rigmon.tui.widgets.source_group import SourceGroup


class LinkGroup(SourceGroup):
    """Thunderbolt/USB4 link readings (speed, lanes, state per link).

    Shows "not present" until the schema carries link readings: `body` is where they
    get drawn once `Readings` has them.
    """

    TITLE: ClassVar[str] = "Links"
    COLLECTORS: ClassVar[tuple[str, ...]] = ("thunderbolt",)

    def body(self, frame: Frame) -> RenderableType | None:
        """Nothing yet: frames carry no link readings in this schema version."""
        return None
