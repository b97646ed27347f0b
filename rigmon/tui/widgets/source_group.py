"""SourceGroup: base of the node screen's per-source boxes (GPUs, rail, storage, links, host)."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.renderables.sparkline import Sparkline
from textual.reactive import reactive
from textual.widget import Widget

from rigmon.schema import Frame


class SourceGroup(Widget):
    """A titled box for one source of a node's readings.

    Subclasses set ``TITLE`` and ``COLLECTORS`` (the agent collectors feeding the source)
    and implement `body`; when it returns ``None`` the box says "not present" and what
    the node's collectors say about it.
    """

    TITLE: ClassVar[str] = ""
    COLLECTORS: ClassVar[tuple[str, ...]] = ()
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "source-group--absent",
        "source-group--label",
        "source-group--ok",
        "source-group--warn",
        "source-group--bad",
        "source-group--spark-low",
        "source-group--spark-high",
    }
    DEFAULT_CSS = """
    SourceGroup {
        height: auto;
    }
    """

    frame: reactive[Frame | None] = reactive(None, layout=True)
    """The node's latest frame."""
    trends: reactive[dict[str, tuple[float, ...]]] = reactive(dict, layout=True)
    """Downsampled history of the node by series name (see rigmon.cluster.history.SERIES)."""

    def on_mount(self) -> None:
        self.border_title = self.TITLE

    def body(self, frame: Frame) -> RenderableType | None:
        """What the source reports in ``frame``; ``None`` when the node has no such readings."""
        return None

    def trend(self, label: str, series: str, extreme: str, figure: str) -> Table:
        """One line: label, current figure, and a sparkline of ``series`` keeping each bar's ``extreme``."""
        label_style = self.get_component_rich_style("source-group--label", partial=True)
        low = self.get_component_rich_style("source-group--spark-low", partial=True).color
        high = self.get_component_rich_style("source-group--spark-high", partial=True).color
        width = max(8, self.content_size.width - 24)
        data = self.trends.get(series, ())
        table = Table.grid(padding=(0, 1))
        table.add_column(width=10, no_wrap=True)
        table.add_column(width=11, justify="right", no_wrap=True)
        table.add_column(width=width, no_wrap=True)
        spark: RenderableType = ""
        if len(data) > 1 and low is not None and high is not None:
            spark = Sparkline(data, width=min(width, len(data)), min_color=low, max_color=high,
                              summary_function=min if extreme == "min" else max)
        table.add_row(Text(label, style=label_style), figure, spark)
        return table

    def _collector_note(self, frame: Frame) -> str:
        states = [f"{name}: {frame.collectors[name].state}" for name in self.COLLECTORS if name in frame.collectors]
        if states:
            return "collector " + ", ".join(states)
        return "no such collector on this agent"

    def render(self) -> RenderableType:
        frame = self.frame
        absent = self.get_component_rich_style("source-group--absent", partial=True)
        if frame is None:
            return Text("no data yet", style=absent)
        body = self.body(frame)
        if body is None:
            return Group(Text("not present", style=absent), Text(self._collector_note(frame), style=absent))
        return body
