"""The history view's events in three looks, on the chart and in the list under it: critical, warning, and
the rest (the job's marks, its processes' exits), in the theme's colours as the alarms screen has them."""

from __future__ import annotations

from rich.color import Color as RichColor
from rich.console import Console
from rich.style import Style
from textual.app import App, ComposeResult
from textual.color import Color
from textual.widgets import Static

from rigmon.cluster.chart import Plotted, PlottedLine, Window
from rigmon.schema import Event
from rigmon.tui.screens.history import HistoryScreen
from rigmon.tui.widgets.history_chart import HistoryChart
from tests.tui.snapshot_apps.recorded import build, open_node, settle
from tests.tui.test_history import open_history, with_late_marks


def theme_colour(app: App[None], name: str) -> RichColor:
    """Theme variable ``name`` (an opaque one) as Rich draws it."""
    return Color.parse(app.theme_variables[name]).rich_color


def list_styles(screen: HistoryScreen) -> list[tuple[str, Style]]:
    """Each line of the event list as drawn, with the style of its number."""
    events = screen.query_one("#history-events", Static)
    out = []
    for strip in events.render_lines(events.region.reset_offset.shrink(events.styles.gutter)):
        first = next(s for s in strip if s.text.strip())
        out.append((strip.text.strip(), first.style or Style()))
    return out


async def test_marks_are_listed_neither_as_warnings_nor_as_critical() -> None:
    # Before: every event not critical was in the warning colour, the job's "epoch 9 checkpoint" too,
    # and read "node:node01: epoch 9 checkpoint".
    frames = with_late_marks(2)
    app, fleet, _ = build([("node01", frames, len(frames))])
    agent = next(iter(fleet.agents.values()))
    agent.journal = True
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(app, fleet, pilot)
        await open_node(app, agent.url, pilot)
        screen = await open_history(app, pilot)
        assert screen.plotted is not None
        severities = [e.severity for e in screen.plotted.events]
        lines = list_styles(screen)
        assert len(lines) == len(severities) == 9
        error, warning = theme_colour(app, "error"), theme_colour(app, "warning")
        assert [style.color for _, style in lines[-2:]] != [warning, warning], lines[-2:]
        assert lines[-2][0].endswith("mark: epoch 8 checkpoint") and lines[-1][0].endswith("mark: epoch 9 checkpoint")
        looks = []
        for (text, style), severity in zip(lines, severities):
            if severity == "critical":
                assert style.color == error and style.bold, text
            elif severity == "warning":
                assert style.color == warning and not style.bold, text
            else:
                assert style.color not in (error, warning) and not style.bold, text
            looks.append((style.color, bool(style.bold)))
        assert len(set(looks)) == 3, looks


def event(at: float, severity: str, kind: str = "alarm_firing") -> Event:
    return Event(id=f"{kind}-{at}", at=at, kind=kind, severity=severity, subject="psu", message="rail", data={})


class ChartApp(App[None]):
    def compose(self) -> ComposeResult:
        yield HistoryChart()


def vertical_lines(chart: HistoryChart) -> list[tuple[str, RichColor | None]]:
    """The glyph and colour of each event line, left to right, on a row of the chart with nothing else."""
    rows = chart.render()
    assert not isinstance(rows, str)
    row = rows.split("\n")[-4]
    return [(s.text, s.style.color if s.style else None)
            for s in row.render(Console(width=chart.size.width)) if s.text in ("│", "┊")][1:-1]


async def test_the_chart_draws_a_mark_as_a_quiet_dotted_line() -> None:
    # Before: a mark's line was drawn as a warning's, and the later of two events in a column won, so a mark
    # drawn over a critical event in its second hid it.
    app = ChartApp()
    async with app.run_test(size=(80, 20)) as pilot:
        chart = app.query_one(HistoryChart)
        chart.window = Window(1000.0, 60.0)
        line = PlottedLine("min", (0.0, 60.0), (1.5, 1.5))
        critical, warning, mark = event(955.0, "critical"), event(970.0, "warning"), event(990.0, "info", "mark")
        chart.plotted = Plotted((line,), (), (critical, warning, mark), 0.0, 2.0, 1.5, 1.5, "frames")
        await pilot.pause()
        error, amber = theme_colour(app, "error"), theme_colour(app, "warning")
        lines = vertical_lines(chart)
        assert [glyph for glyph, _ in lines] == ["│", "│", "┊"], lines
        assert [colour for _, colour in lines[:2]] == [error, amber]
        assert lines[2][1] not in (error, amber, theme_colour(app, "foreground"))
        # A mark in the second of a critical event: the critical line is the one seen.
        chart.plotted = Plotted((line,), (), (critical, event(955.0, "info", "mark")), 0.0, 2.0, 1.5, 1.5, "frames")
        await pilot.pause()
        assert vertical_lines(chart) == [("│", error)]
