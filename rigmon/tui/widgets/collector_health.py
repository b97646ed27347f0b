"""CollectorHealth: state, error and duration of each of a node's collectors."""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from rigmon.schema import CollectorStatus
from rigmon.tui.text import plain


class CollectorHealth(Widget):
    """One line per collector: state, how long its last run took, and its error."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "collector-health--label",
        "collector-health--ok",
        "collector-health--absent",
        "collector-health--error",
    }
    DEFAULT_CSS = """
    CollectorHealth {
        height: auto;
    }
    """

    collectors: reactive[dict[str, CollectorStatus]] = reactive(dict, layout=True)
    """Status of every collector in the node's latest frame, by name."""

    def on_mount(self) -> None:
        self.border_title = "Collectors"

    def render(self) -> RenderableType:
        if not self.collectors:
            return Text("no data yet", style=self.get_component_rich_style("collector-health--absent", partial=True))
        table = Table(box=None, padding=(0, 1), show_edge=False,
                      header_style=self.get_component_rich_style("collector-health--label", partial=True))
        table.add_column("collector", no_wrap=True)
        table.add_column("state", no_wrap=True)
        table.add_column("took", justify="right", no_wrap=True)
        table.add_column("error", overflow="fold")
        for name, status in sorted(self.collectors.items()):
            kind = "ok" if status.state == "ok" else "absent" if status.state in ("absent", "pending") else "error"
            style = self.get_component_rich_style(f"collector-health--{kind}", partial=True)
            took = "—" if status.duration_s is None else f"{status.duration_s * 1000:.1f} ms"
            # Names and error texts come from the agent and the hardware: text, never markup.
            table.add_row(plain(name), Text(status.state, style=style), took, plain(status.error, missing=""))
        return table
