"""ClusterHeader: the column titles above the node rows."""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from rigmon.tui.gauge import span_label
from rigmon.tui.row_columns import column_widths, columns_for, grid


class ClusterHeader(Widget):
    """Titles of the cluster table's columns, laid out like `NodeRow`, and the span of the
    trends under them (in the node column, when it fits)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"cluster-header--title"}
    DEFAULT_CSS = """
    ClusterHeader {
        height: 1;
    }
    """

    trend_span_s: reactive[float | None] = reactive(None)
    """Seconds the rows' trends cover (the longest of any node); ``None``: not known yet."""
    with_paths: reactive[bool] = reactive(False)
    """Whether the table has the worst peer path's column (as `NodeRow.with_paths`)."""

    def render(self) -> RenderableType:
        style = self.get_component_rich_style("cluster-header--title", partial=True)
        columns = columns_for(self.size.width, self.with_paths)
        widths = column_widths(self.size.width, columns)
        table = grid(widths)
        titles = [Text(c.title, style=style, justify="left" if i == 0 else "right") for i, c in enumerate(columns)]
        label = span_label(self.trend_span_s)
        if label:
            span = f"trends {label}"
            gap = widths[0] - len(columns[0].title) - len(span)
            if gap >= 1:
                titles[0] = Text(columns[0].title + " " * gap + span, style=style)
        table.add_row(*titles)
        return table
