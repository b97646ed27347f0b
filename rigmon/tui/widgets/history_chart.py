"""HistoryChart: one chart of a node's history drawn by plotext, in a figure of its own."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import plotext
from plotext._kernel.terminal import terminal as PlotextTerminal
from plotext._settings.themes import add_theme
from rich.color import Color as RichColor
from rich.style import Style
from rich.text import Text
from textual.app import RenderResult
from textual.color import Color
from textual.reactive import reactive
from textual.widget import Widget

from rigmon.cluster.chart import Plotted, Window, time_ticks, value_ticks
from rigmon.schema import Event

#: Theme variables the lines take in turn (the first line, the one whose extreme matters,
#: in the primary colour).
LINE_COLOURS = ("primary", "accent", "secondary", "success", "foreground")
#: Cells of plot width per time tick.
CELLS_PER_TICK = 14
#: Rows of plot height per value tick at least.
ROWS_PER_VALUE_TICK = 3

RGB = tuple[int, int, int]

#: How an event looks on the chart and in the list under it: critical, warning, and the rest (the job's
#: marks, its processes' exits), told apart as the alarms screen tells its severities apart.
EventLevel = Literal["bad", "warn", "info"]
#: Order the events' lines are drawn in, so where two share a column the worse is seen.
LEVEL_RANK: dict[EventLevel, int] = {"info": 0, "warn": 1, "bad": 2}
#: Theme variable and glyph of an event's vertical line by its level: a mark or an exit is quiet
#: (dotted, in the muted foreground), not a warning.
EVENT_PENS: dict[EventLevel, tuple[str, str]] = {
    "bad": ("error", "│"),
    "warn": ("warning", "│"),
    "info": ("foreground-muted", "┊"),
}


def event_level(event: Event) -> EventLevel:
    """The look of ``event`` by its severity (``info`` for a mark)."""
    return "bad" if event.severity == "critical" else "warn" if event.severity == "warning" else "info"


class HistoryChart(Widget):
    """Lines of a `Plotted` chart over its window, with threshold lines and the node's
    events as numbered vertical lines (the screen lists them under the chart).

    plotext 6 draws into a module-level figure (``plotext.figure``), which the snapshot
    report also uses, from a worker thread: each chart builds its own figure (the master
    figure of a terminal object of its own) so the two never share state. Colours come from
    the app's theme.
    """

    DEFAULT_CSS: ClassVar[str] = """
    HistoryChart {
        height: 1fr;
    }
    """

    plotted: reactive[Plotted | None] = reactive(None)
    """What to draw; ``None`` draws an empty frame."""
    window: reactive[Window | None] = reactive(None)
    """The time the x axis spans."""

    def __init__(self) -> None:
        super().__init__()
        # A terminal object of plotext's own makes a master figure that is this widget's alone;
        # its size is the widget's, not bounded by the size of the terminal the app runs in.
        terminal = PlotextTerminal()
        terminal.limit(False, False)
        self._figure: Any = terminal._master

    def _rgb(self, name: str) -> RGB:
        """Theme variable ``name`` as drawn on the chart's surface (a translucent one, such as
        ``foreground-muted``, blended onto it)."""
        variables = self.app.theme_variables
        value = variables.get(name) or variables.get("foreground") or "white"
        colour = Color.parse(value)
        if colour.a < 1.0:
            colour = Color.parse(variables.get("surface") or "black") + colour
        return colour.rgb

    def legend(self, labels: list[str]) -> Text:
        """``labels`` of the lines, each after a mark in its line's colour (for the screen to show)."""
        out = Text()
        for index, label in enumerate(labels):
            if index:
                out.append("  ")
            out.append("━━ ", style=Style(color=RichColor.from_rgb(*self._rgb(LINE_COLOURS[index % len(LINE_COLOURS)]))))
            out.append(label)
        return out

    def _pen(self, name: str, symbol: str | None = None) -> Any:
        """A plotext marker in theme colour ``name`` (``symbol``: plotext's default glyphs)."""
        return plotext.marker(symbol=symbol, pixel=plotext.pixel(foreground=self._rgb(name)))

    def _theme(self) -> str:
        """A plotext theme of the app theme's surface and foreground (registered once per theme)."""
        name = f"rigmon-{self.app.theme}"
        add_theme(name, canvas=self._rgb("surface"), text=self._rgb("foreground"),
                  sequence=[self._rgb(c) for c in LINE_COLOURS], grid=self._rgb("panel"))
        return name

    def render(self) -> RenderResult:
        width, height = self.size.width, self.size.height
        if width < 10 or height < 5:
            return ""
        fig = self._figure
        fig.clear()
        fig.theme(self._theme())
        # The legend box would cover the data's left edge: the screen lists the lines above.
        fig.legend(False)
        plotted, window = self.plotted, self.window
        if plotted is not None and window is not None:
            self._draw(fig, plotted, window, width, height)
        fig.plot_size(width, height)
        return Text.from_ansi(str(fig.build()), no_wrap=True, end="")

    def _draw(self, fig: Any, plotted: Plotted, window: Window, width: int, height: int) -> None:
        span = window.span_s
        fig.ruler("x").lim(0.0, span)
        fig.ruler("y").lim(plotted.y_low, plotted.y_high)
        # Our own value labels: plotext's own write 1436 MB/s as "1.4e3" and a resistance to five decimals.
        # A label every third row, but four even on a short chart (80x24) while rows allow.
        most = max(2, min(4, height // 2), (height - 2) // ROWS_PER_VALUE_TICK)
        values = value_ticks(plotted.y_low, plotted.y_high, most)
        if values:
            fig.ruler("y").ticks([v for v, _ in values], [label for _, label in values])
        ticks = time_ticks(window, max(2, width // CELLS_PER_TICK))
        fig.ruler("x").ticks([x for x, _ in ticks], [label for _, label in ticks])
        # Thresholds and events first, so the data is drawn over them.
        for threshold in plotted.thresholds:
            colour = {"warn": "warning", "bad": "error"}.get(threshold.level, "foreground")
            fig.draw(fig.segment((0.0, span), (threshold.value, threshold.value), marker=self._pen(colour, "─")))
        for event in sorted(plotted.events, key=lambda e: LEVEL_RANK[event_level(e)]):
            x = event.at - window.from_at
            fig.draw(fig.segment((x, x), (plotted.y_low, plotted.y_high),
                                 marker=self._pen(*EVENT_PENS[event_level(event)])))
        # Events closer than a few cells share one label ("3-6"), which would overwrite each other.
        near_s = span * 6 / max(1, width)
        groups: list[tuple[float, int, int]] = []
        for number, event in enumerate(plotted.events, start=1):
            x = event.at - window.from_at
            if groups and x - groups[-1][0] <= near_s:
                groups[-1] = (groups[-1][0], groups[-1][1], number)
            else:
                groups.append((x, number, number))
        for index, line in enumerate(plotted.lines):
            pen = self._pen(LINE_COLOURS[index % len(LINE_COLOURS)])
            # Each run between gaps on its own: no line across the time the node sent nothing.
            for xs, ys in line.runs():
                signal = fig.signal(list(xs), list(ys), marker=pen)
                if len(xs) > 1:
                    signal.lines()
                signal.label(line.label)
                fig.draw(signal)
        # The events' numbers last, on top of everything.
        for x, first, last in groups:
            label = str(first) if first == last else f"{first}-{last}"
            fig.draw(fig.text(x, plotted.y_high, label))
