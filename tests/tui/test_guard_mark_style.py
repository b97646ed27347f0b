"""The guard's mark on the cluster row is drawn as what it is: caps in force, holding blind, unable to act or
stuck caps in the alarm style; released (``Goff``) muted; dry-run (``dry1``) as information. Both ways the row
is drawn (direct lines, and the table of a row too narrow for every column) agree."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.segment import Segment
from textual.app import App, ComposeResult

import rigmon.tui
from rigmon.cluster.node_view import NodeView
from rigmon.summary import NodeSummary
from rigmon.tui.guard_marks import mark_style
from rigmon.tui.row_columns import COLUMNS, column_widths
from rigmon.tui.widgets.node_row import NodeRow


class RowApp(App[None]):
    CSS_PATH = str(Path(rigmon.tui.__file__).parent / "rigmon.tcss")

    def compose(self) -> ComposeResult:
        yield NodeRow()


def view(mark: str) -> NodeView:
    summary = NodeSummary(node="node01", seq=5, taken_at=1.0, alarms=0, rail_min_volts=11.9, guard_mark=mark)
    return NodeView("a", "node01", "http://a", "live", None, 0.4, summary, {})


def mark_segment(app: App[None], row: NodeRow, renderable: object, mark: str) -> Segment:
    segments = list(Segment.simplify(app.console.render(renderable, app.console_options.update_width(120))))  # type: ignore[arg-type]
    return next(s for s in segments if s.text.strip() == mark)


@pytest.mark.parametrize(("mark", "style"), [
    ("G1", "alarm"), ("G2h", "alarm"), ("G0h", "alarm"), ("g1", "alarm"), ("G!", "alarm"), ("G1?", "alarm"),
    ("Goff", "guard-off"), ("dryoff", "guard-off"), ("gof", "alarm"),
    ("dry1", "guard-dry"), ("dry2h", "guard-dry"), ("dry1?", "guard-dry"),
    ("Gnew", "alarm"),  # a mark of a newer agent this dashboard does not know: not played down
])
def test_each_mark_has_its_style(mark: str, style: str) -> None:
    assert mark_style(mark) == style


async def test_the_row_draws_each_mark_in_its_own_style() -> None:
    app = RowApp()
    async with app.run_test(size=(120, 4)):
        row = app.query_one(NodeRow)
        alarm, off, dry = row._style("alarm"), row._style("guard-off"), row._style("guard-dry")
        assert len({alarm.color, off.color, dry.color}) == 3
        live = row._style("live")
        widths = column_widths(120, COLUMNS)
        for mark, wanted in (("G1", alarm), ("Goff", off), ("dry1", dry), ("G1?", alarm)):
            for draw in (row._render_lines, row._render_table):
                segment = mark_segment(app, row, draw(view(mark), COLUMNS, widths), mark)
                assert segment.style is not None and segment.style.color == wanted.color, (mark, draw.__name__)
                assert segment.style.color != live.color
