"""HistoryChart: one chart of a node's history drawn with plotext (textual-plotext's `PlotextPlot`)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import RenderResult
from textual.color import Color
from textual.reactive import reactive
from textual_plotext import PlotextPlot

from rigmon.cluster.chart import Plotted, Window, time_ticks

#: Theme variables the lines take in turn (the first line, the one whose extreme matters,
#: in the primary colour).
LINE_COLOURS = ("primary", "accent", "secondary", "success", "foreground")
#: Cells of plot width per time tick.
CELLS_PER_TICK = 14

RGB = tuple[int, int, int]


class HistoryChart(PlotextPlot):
    """Lines of a `Plotted` chart over its window, with threshold lines and the node's
    events as numbered vertical lines (the screen lists them under the chart).

    Its figure is its own (no module-level plotext state); colours come from the theme.
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

    def watch_plotted(self) -> None:
        self.refresh()

    def watch_window(self) -> None:
        self.refresh()

    def _rgb(self, name: str) -> RGB:
        value = self.app.theme_variables.get(name) or self.app.theme_variables.get("foreground") or "white"
        return Color.parse(value).rgb

    def render(self) -> RenderResult:
        self._draw()
        return super().render()

    def _draw(self) -> None:
        plt = self.plt
        plt.clear_figure()
        plotted, window = self.plotted, self.window
        if plotted is None or window is None:
            return
        plt.xlim(0.0, window.span_s)
        plt.ylim(plotted.y_low, plotted.y_high)
        ticks = time_ticks(window, max(2, self.size.width // CELLS_PER_TICK))
        plt.xticks([x for x, _ in ticks], [label for _, label in ticks])
        for threshold in plotted.thresholds:
            colour = self._rgb({"warn": "warning", "bad": "error"}.get(threshold.level, "foreground"))
            plt.hline(threshold.value, colour)
        # Events closer than a few cells share one label ("3-6"), which would overwrite each other.
        near_s = window.span_s * 3 / max(1, self.size.width)
        groups: list[tuple[float, int, int, bool]] = []
        for number, event in enumerate(plotted.events, start=1):
            x = event.at - window.from_at
            critical = event.severity == "critical"
            plt.vline(x, self._rgb("error" if critical else "warning"))
            if groups and x - groups[-1][0] <= near_s:
                first_x, first, _, was_critical = groups[-1]
                groups[-1] = (first_x, first, number, was_critical or critical)
            else:
                groups.append((x, number, number, critical))
        for x, first, last, critical in groups:
            label = str(first) if first == last else f"{first}-{last}"
            plt.text(label, x, plotted.y_high, color=self._rgb("error" if critical else "warning"),
                     background=self._rgb("surface"))
        for index, line in enumerate(plotted.lines):
            colour = self._rgb(LINE_COLOURS[index % len(LINE_COLOURS)])
            plt.plot(list(line.xs), list(line.ys), label=line.label, color=colour, marker="braille")
