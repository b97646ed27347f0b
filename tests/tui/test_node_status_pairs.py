"""The node screen's heading at 80 columns keeps each label with its value: an unreachable node's
``last data 25s ago`` never wraps between its words, whatever the length of the failure reason."""

from __future__ import annotations

import io
import re

from rich.console import Console, RenderableType
from textual.app import App, ComposeResult

from rigmon.cluster.node_view import NodeView
from rigmon.tui.widgets.node_status import NodeStatus

REASON = "connection refused by 10.0.0.2:9871 while following /v1/stream after the agent restarted"


def text(renderable: RenderableType, width: int) -> str:
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def unreachable(reason: str) -> NodeView:
    return NodeView("http://10.0.0.2:9871", "node01", "http://10.0.0.2:9871", "unreachable", reason, 25.0, None)


class StatusApp(App[None]):
    def compose(self) -> ComposeResult:
        yield NodeStatus()


async def test_last_data_stays_whole_at_80_columns() -> None:
    app = StatusApp()
    async with app.run_test(size=(80, 12)) as pilot:
        status = app.query_one(NodeStatus)
        # Every cut of the reason: the pair falls at every place along the line.
        for n in range(1, len(REASON) + 1):
            status.view = unreachable(REASON[:n])
            await pilot.pause()
            shown = text(status.render(), status.content_size.width)
            lines = [line.rstrip() for line in shown.splitlines()]
            # On one line (the wide layout aligns the values in a column: "last data    25s ago").
            assert any(re.search(r"last data +25s ago", line) for line in lines), (n, lines)
            # The reason is all there, and nothing is cut.
            assert "…" not in shown and REASON[:n].split()[-1] in shown, (n, lines)
