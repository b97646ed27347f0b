"""NodeStatus: the node screen's heading: state, reason, age of data, agent run and restarts."""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from rigmon.cluster.store import NodeView
from rigmon.schema import Info
from rigmon.tui import format as fmt


class NodeStatus(Widget):
    """Where the node's data comes from and how fresh it is."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "node-status--label",
        "node-status--live",
        "node-status--stale",
        "node-status--unreachable",
        "node-status--connecting",
    }
    DEFAULT_CSS = """
    NodeStatus {
        height: auto;
    }
    """

    view: reactive[NodeView | None] = reactive(None, layout=True)
    """The node as the store sees it now."""
    info: reactive[Info | None] = reactive(None, layout=True)
    """The agent's /v1/info answer, if it gave one."""

    def render(self) -> RenderableType:
        view = self.view
        if view is None:
            return ""
        label = self.get_component_rich_style("node-status--label", partial=True)
        state = Text(view.state, style=self.get_component_rich_style(f"node-status--{view.state}", partial=True))
        if view.reason and view.state != "live":
            state.append(f": {view.reason}")
        info = self.info
        table = Table.grid(padding=(0, 2))
        for _ in range(4):
            table.add_column(no_wrap=True)
        table.add_row(Text("node", style=label), view.name, Text("agent", style=label), view.url)
        table.add_row(Text("state", style=label), state,
                      Text("last data", style=label), "never" if view.age_s is None else f"{fmt.age(view.age_s)} ago")
        run = f"{info.run_id} (rigmon {info.agent_version})" if info else fmt.MISSING
        seq = str(view.summary.seq) if view.summary else fmt.MISSING
        table.add_row(Text("run", style=label), run, Text("seq", style=label), seq)
        table.add_row(Text("restarts", style=label), str(view.restarts),
                      Text("frames lost", style=label), str(view.frames_lost))
        return table
