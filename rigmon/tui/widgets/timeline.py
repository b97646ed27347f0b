"""IncidentTimeline: the node screen's first box, the node's recent trouble one step per line."""

from __future__ import annotations

import time
from typing import ClassVar

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from rigmon.cluster.incident import Problem, joined
from rigmon.cluster.incident_timeline import Step
from rigmon.tui.text import plain

#: Marks of a step's level, so the story reads without colour too.
MARKS: dict[str, str] = {"bad": "✖", "warn": "▲", "info": "·"}


class IncidentTimeline(Widget):
    """Time (UTC, the agent's clock; with the date when the steps are of more than one day), a mark
    and what happened, oldest first; above the steps what is wrong now. "no trouble" when the node
    has none."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "incident-timeline--bad",
        "incident-timeline--warn",
        "incident-timeline--info",
        "incident-timeline--time",
        "incident-timeline--empty",
    }
    DEFAULT_CSS = """
    IncidentTimeline {
        height: auto;
    }
    """

    steps: reactive[tuple[Step, ...]] = reactive(tuple, layout=True)
    """The node's incident steps, oldest first (`rigmon.cluster.incident.timeline`)."""
    now: reactive[tuple[Problem, ...]] = reactive(tuple, layout=True)
    """What is wrong with the node now, worst first."""

    def on_mount(self) -> None:
        self.border_title = "Incident"

    def _style(self, name: str) -> str:
        return str(self.get_component_rich_style(f"incident-timeline--{name}", partial=True))

    def render(self) -> RenderableType:
        steps, now = self.steps, self.now
        if not steps and not now:
            return Text("no trouble seen", style=self._style("empty"))
        table = Table.grid(padding=(0, 1))
        table.add_column(no_wrap=True)
        table.add_column(no_wrap=True, width=1)
        table.add_column(overflow="fold", ratio=1)
        if now:
            worst = now[0].level
            table.add_row(Text("now", style=self._style("time")), Text(MARKS[worst], style=self._style(worst)),
                          plain(joined(now), self._style(worst)))
        # Steps of more than one UTC day (a trend over days, an accelerated simulation) carry their date:
        # "01:22:05" below "02:43:58" would read as time running backwards.
        days = {time.gmtime(step.at)[:3] for step in steps}
        stamp_format = "%H:%M:%S" if len(days) <= 1 else "%m-%d %H:%M:%S"
        for step in steps:
            stamp = time.strftime(stamp_format, time.gmtime(step.at))
            mark = Text(MARKS[step.level], style=self._style(step.level))
            table.add_row(Text(stamp, style=self._style("time")), mark,
                          plain(step.text, self._style(step.level) if step.level != "info" else ""))
        return table
