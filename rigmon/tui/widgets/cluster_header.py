"""ClusterHeader: the column titles above the node rows."""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual.widget import Widget

from rigmon.tui.widgets.node_row import COLUMNS, column_widths, grid


class ClusterHeader(Widget):
    """Titles of the cluster table's columns, laid out like `NodeRow`."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"cluster-header--title"}
    DEFAULT_CSS = """
    ClusterHeader {
        height: 1;
    }
    """

    def render(self) -> RenderableType:
        style = self.get_component_rich_style("cluster-header--title", partial=True)
        table = grid(column_widths(self.size.width))
        table.add_row(*(Text(c.title, style=style, justify="left" if i == 0 else "right")
                        for i, c in enumerate(COLUMNS)))
        return table
