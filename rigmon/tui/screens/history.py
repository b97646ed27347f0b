"""HistoryScreen: one chart of a node's history from its agent's journal (or, its agent out of reach,
from what the dashboard holds of it), with zoom, pan and events."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Header, Static

from rigmon.cluster.chart import (
    DEFAULT_SPAN_S,
    Plotted,
    Window,
    clock_label,
    keep_events,
    opening_chart,
    plot_data,
)
from rigmon.cluster.chart_model import Chart
from rigmon.cluster.held_history import HeldHistory
from rigmon.cluster.kept_events import MARK_KIND
from rigmon.schema import Event, History
from rigmon.tui.event_merge import merge_xid_events
from rigmon.tui.gauge import span_label
from rigmon.tui.key_line import KeyLine
from rigmon.tui.text import plain
from rigmon.tui.widgets.history_chart import HistoryChart, event_level
from rigmon.tui.widgets.replay_bar import ReplayBar

#: Lines the event list under the chart may always take (all it has at 80x24).
EVENT_LINES = 6
#: Rows the chart keeps at least (what it has at 80x24): on a taller screen the event list takes
#: the rest, so the marks late in the window are listed, not "… N more".
CHART_ROWS = 14
#: Rows besides the chart and the list: the header, the line above the chart, its legend, the footer
#: (and in a replay the time cursor above the footer: one more).
OTHER_ROWS = 4
#: The footer's entries of the zoom keys and of the pan keys: one each, the keys side by side (``+- Zoom``).
ZOOM_KEYS = Binding.Group("Zoom", compact=True)
PAN_KEYS = Binding.Group("Pan", compact=True)
#: Fetches a node's history: (from_at, to_at, series names) to a `History`, or to a `HeldHistory`
#: (what the dashboard holds of the node, its agent's not to be had, with a note saying so), or raises
#: `HistoryUnavailable` saying why there is none.
HistoryLoader = Callable[[float, float, Sequence[str]], Awaitable[History | HeldHistory]]
#: Fetches the charts the node offers by its agent's whole latest frame, when the view opened on a summary
#: record's (which has only the sensors at their critical limit); ``None``: none to add.
ChartsLoader = Callable[[], Awaitable[Sequence[Chart] | None]]


#: Decimals of the lowest and highest figures by the chart's unit: the rail to the millivolt,
#: as the cluster row and the node screen give it; others to four significant figures.
UNIT_DECIMALS: dict[str, int] = {"V": 3, "mΩ": 3}


def figure(value: float, unit: str) -> str:
    """``11.255`` for 11.255 V, ``343.3`` for 343.3 W (a chart's lowest or highest value)."""
    decimals = UNIT_DECIMALS.get(unit)
    return f"{value:.4g}" if decimals is None else f"{value:.{decimals}f}"


def event_lines(screen_rows: int, replaying: bool = False) -> int:
    """Lines the event list may take on a screen ``screen_rows`` high: the rows the chart does not
    need (nor, ``replaying``, the time cursor), and at least `EVENT_LINES`."""
    return max(EVENT_LINES, screen_rows - OTHER_ROWS - replaying - CHART_ROWS)


def event_text(event: Event) -> str:
    """An event in the list under the chart: ``psu: <message>``; a mark ``mark: epoch 3 checkpoint`` (its
    subject is the node, which the screen's title names)."""
    return f"{MARK_KIND if event.kind == MARK_KIND else event.subject}: {event.message}"


#: Why the view has nothing to show when the node offers no chart.
NOTHING_TO_CHART = "this node reports nothing to chart"


class HistoryUnavailable(Exception):
    """The node's history cannot be had; the message says why (shown as "no history: ...")."""


class HistoryScreen(Screen[None]):
    """A chart of one node's history over a window of minutes to days.

    Args:
        name: the node's name (for the title).
        charts: the charts the node offers (`rigmon.cluster.chart.charts_for`).
        now: the newest time there is (the node's last frame, or the replay's cursor), asked
            when the view opens, on the now key, and in a replay whenever its time cursor moves: a
            window that ends at the newest time follows it (`follow`).
        load: fetches the history (an agent's ``/v1/history``, what the dashboard holds of the node
            when its agent cannot answer, or a replay's frames).
        reason: why there is no history to show at all (no frame from the node yet).
        span_s: the window's span to start with.
        subject: what the node's worst problem is about (`rigmon.cluster.incident.Problem.subject`): the
            view opens on the chart of its series (`opening_chart`: a hot sensor's or drive's temperature),
            else on the first.
        more_charts: asked once the view is open, for the charts the node offers by its agent's whole
            latest frame (`offer`): a node off screen sends summary records, whose slim frames leave out the
            temperature sensors below their critical limit.
    """

    # At 80 columns Textual's footer cuts the keys that do not fit, and the app's come after these: zoom and
    # pan are one entry each (``+- Zoom``), and the app's keys the cluster screen offers (alarms, links,
    # export, theme) work here unlisted, so that quit and help stay in sight (tests/tui/test_history_keys.py).
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("s", "chart(1)", "Series"),
        Binding("plus,equals_sign", "zoom(-1)", "Zoom in", key_display="+", group=ZOOM_KEYS),
        Binding("minus", "zoom(1)", "Zoom out", key_display="-", group=ZOOM_KEYS),
        Binding("comma,less_than_sign", "pan(-1)", "Earlier", key_display=",", group=PAN_KEYS),
        Binding("full_stop,greater_than_sign", "pan(1)", "Later", key_display=".", group=PAN_KEYS),
        Binding("n", "now", "Now"),
        Binding("S", "chart(-1)", "Previous series", show=False),
        Binding("a", "app.show_mode('alarms')", "Alarms", show=False),
        Binding("l", "app.show_mode('links')", "Links", show=False),
        Binding("e", "app.export", "Export", show=False),
        Binding("t", "app.cycle_theme", "Theme", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {"history-screen--info", "history-screen--warn", "history-screen--bad"}

    @dataclass
    class Loaded(Message):
        """A fetch for ``window`` and ``chart`` ended: the ``history``, or why there is none; ``note``:
        the history is what the dashboard holds, not the agent's (`HeldHistory.note`)."""

        serial: int
        history: History | None
        reason: str | None
        note: str | None = None

    @dataclass
    class ChartsFound(Message):
        """`more_charts` answered: every chart the node offers."""

        charts: Sequence[Chart]

    def __init__(self, name: str, charts: Sequence[Chart], now: Callable[[], float], load: HistoryLoader,
                 reason: str | None = None, span_s: float = DEFAULT_SPAN_S, subject: str | None = None,
                 more_charts: ChartsLoader | None = None) -> None:
        super().__init__()
        self.more_charts = more_charts
        self.node_name = name
        self.charts = list(charts)
        self.subject = subject
        self.chart_index = opening_chart(self.charts, subject)
        self.now = now
        self.window = Window(now(), span_s)
        #: The newest time when last asked: a window ending there follows the replay's cursor.
        self._newest_at = self.window.end_at
        self.load = load
        self.history: History | None = None
        #: The history drawn is what the dashboard holds of the node, not its agent's: the note says so.
        self.note: str | None = None
        self.plotted: Plotted | None = None
        self.reason = reason if reason is not None or self.charts else NOTHING_TO_CHART
        self.fixed_reason = self.reason is not None
        self._serial = 0
        #: Another agent answers at the node's URL than when the view opened: said above the chart (`reopen`).
        self.agent_note: str | None = None
        #: The node's key on the dashboard, the generation of its store the view draws, and whether that store
        #: had a frame (set by `rigmon.tui.operations.history_screen`, read by its `reopen_history`).
        self.node_key: str | None = None
        self.generation = 0
        self.had_frame = True
        #: The node's state as last drawn (`show_state`); live until told otherwise.
        self.node_state = "live"

    def reopen(self, name: str, charts: Sequence[Chart], reason: str | None, span_s: float,
               note: str | None = None) -> None:
        """Start over on the node's data as it is now: another agent answers at its URL (``note`` says so,
        above the chart from now on), or its first frame came. What was drawn goes, and an answer still on
        its way for it is dropped (`fetch` moves the serial on); the chart shown stays if the node offers it (else
        the view opens as it did, on the chart of its problem's subject)."""
        key = self.chart.key if self.chart is not None else None
        self.node_name = name
        self._title()
        self.charts = list(charts)
        self.chart_index = next((i for i, c in enumerate(self.charts) if c.key == key),
                                opening_chart(self.charts, self.subject))
        if note is not None:
            self.agent_note = note
        self.reason = reason if reason is not None or self.charts else NOTHING_TO_CHART
        self.fixed_reason = self.reason is not None
        self.note = None
        self.plotted = None
        self.window = Window(self.now(), span_s)
        self._newest_at = self.window.end_at
        self.fetch()

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="history-head")
        yield HistoryChart()
        yield Static(id="history-events")
        yield ReplayBar()
        yield KeyLine()

    def on_mount(self) -> None:
        self._title()
        self.fetch()
        if self.more_charts is not None:
            self.run_worker(self._find_charts(self.more_charts), group="charts", exclusive=True, exit_on_error=False)

    async def _find_charts(self, more_charts: ChartsLoader) -> None:
        charts = await more_charts()
        if charts:
            self.post_message(self.ChartsFound(charts))

    def on_history_screen_charts_found(self, message: ChartsFound) -> None:
        self.offer(message.charts)

    def offer(self, charts: Sequence[Chart]) -> None:
        """Every chart the node offers, found after the view opened (`more_charts`): the chart shown stays
        (its history too), ``s`` now cycles through them all; a view that had nothing to chart opens as
        it would have (on the chart of its problem's subject)."""
        if self.fixed_reason and not self.charts and self.reason != NOTHING_TO_CHART:
            return  # no frame from the node: `reopen` starts the view over when one comes
        shown = self.chart
        self.charts = list(charts)
        if shown is not None:
            index = next((i for i, c in enumerate(self.charts) if c.key == shown.key), None)
            if index is None:
                # Not among them (a reading the newer frame lacks): it stays, where it was.
                index = min(self.chart_index, len(self.charts))
                self.charts.insert(index, shown)
            self.chart_index = index
            self._draw()
            return
        self.chart_index = opening_chart(self.charts, self.subject)
        self.reason = None
        self.fixed_reason = False
        self.fetch()

    def show_state(self, state: str) -> None:
        """The node's state now (`rigmon.cluster.node_view.NodeState`): said in the title unless ``live``, so that a
        node that dies (or goes quiet) while its history is read is not taken for one still sending."""
        if state != self.node_state:
            self.node_state = state
            self._title()

    def _title(self) -> None:
        """``node01 · history``, and the node's state when it is not live: ``node01 · history · unreachable``."""
        state = "" if self.node_state == "live" else f" · {self.node_state}"
        self.sub_title = f"{self.node_name} · history{state}"

    @property
    def chart(self) -> Chart | None:
        """The chart shown."""
        return self.charts[self.chart_index] if self.charts else None

    def fetch(self, keep: bool = False) -> None:
        """Ask for the chart's series over the window (the newest ask wins); ``keep``: the chart
        drawn stays until the answer comes (the window follows a playing replay: no "loading…")."""
        chart = self.chart
        self._serial += 1
        if keep and chart is not None and not self.fixed_reason and self.history is not None:
            self.run_worker(self._fetch(self._serial, chart, self.window), group="history", exclusive=True,
                            exit_on_error=False)
            return
        self.history = None
        if chart is None or self.fixed_reason:
            self._draw()
            return
        self.reason = None
        self._draw()
        self.run_worker(self._fetch(self._serial, chart, self.window), group="history", exclusive=True,
                        exit_on_error=False)

    async def _fetch(self, serial: int, chart: Chart, window: Window) -> None:
        try:
            answer = await self.load(window.from_at, window.end_at, chart.series)
        except HistoryUnavailable as exc:
            self.post_message(self.Loaded(serial, None, str(exc)))
            return
        if isinstance(answer, HeldHistory):
            self.post_message(self.Loaded(serial, answer.history, None, answer.note))
        else:
            self.post_message(self.Loaded(serial, answer, None))

    def on_resize(self, event: Resize) -> None:
        # The list's length follows the screen's height (`event_lines`); while a new window loads,
        # the list is the old one's and is redrawn when it comes.
        if self.history is not None and self.plotted is not None and self.plotted.lines:
            self._list_events(self.plotted, event.size.height)

    def on_replay_bar_moved(self, message: ReplayBar.Moved) -> None:
        self.follow()

    def follow(self) -> None:
        """In a replay, keep a window that ended at the newest time (`now`: the cursor) ending at it,
        as the cursor plays or seeks, backwards too; one panned back stays, unless now past the cursor."""
        newest_at = self.now()
        end_at = self.window.end_at
        following = end_at >= self._newest_at or end_at > newest_at
        self._newest_at = newest_at
        if following and end_at != newest_at:
            self.window = Window(newest_at, self.window.span_s)
            self.fetch(keep=True)

    def on_history_screen_loaded(self, message: Loaded) -> None:
        if message.serial != self._serial:
            return
        self.history = message.history
        self.reason = message.reason
        self.note = message.note
        self._draw()

    def _draw(self) -> None:
        chart = self.chart
        head = self.query_one("#history-head", Static)
        plot = self.query_one(HistoryChart)
        events = self.query_one("#history-events", Static)
        window = self.window
        end = clock_label(window.end_at, 1.0, window.span_s)
        if window.span_s <= 86400 and time.gmtime(window.end_at)[:3] != time.gmtime(self.now())[:3]:
            # Panned back to another day: "15m to 03:31:46" alone would read as today.
            end = time.strftime("%Y-%m-%d ", time.gmtime(window.end_at)) + end
        when = f"{span_label(window.span_s)} to {end} UTC"
        agent = Text()
        if self.agent_note is not None:
            agent.append(plain(f"{self.agent_note}\n"))
            agent.stylize(self.get_component_rich_style("history-screen--warn", partial=True))
        if chart is None or (self.history is None and self.reason is not None):
            head.update(agent + Text.assemble(plain(f"no history: {self.reason or 'nothing to chart'}"), f"  ({when})"))
            plot.display = False
            events.update("")
            self.plotted = None
            return
        plot.display = True
        if self.history is None:
            head.update(agent + Text(f"{chart.title} · {when} · loading…"))
            return
        # An Xid that NVML and the kernel log both report is one event, as on the node screen: merged
        # before the chart chooses the events it keeps and counts those it does not.
        self.plotted = plotted = plot_data(chart, self.history, window, merge=merge_xid_events)
        figures = ""
        if plotted.lowest is not None and plotted.highest is not None:
            figures = (f" · lowest {figure(plotted.lowest, chart.unit)} {chart.unit}, "
                       f"highest {figure(plotted.highest, chart.unit)} {chart.unit}")
        tier = "every frame" if plotted.tier == "frames" else f"{plotted.tier} buckets"
        title = agent
        if self.note is not None:
            # Not the agent's journal: said first, in the warning colour, so it is not read as the whole history.
            title.append(f"{self.note}\n", style=self.get_component_rich_style("history-screen--warn", partial=True))
        title.append(f"{chart.title} · {when} · {tier}{figures} · series {self.chart_index + 1} of {len(self.charts)}\n")
        head.update(title.append_text(plot.legend([line.label for line in plotted.lines])))
        plot.window = window
        plot.plotted = plotted
        if not plotted.lines:
            events.update(Text("no points in this window"))
            return
        self._list_events(plotted, self.size.height)

    def _list_events(self, plotted: Plotted, screen_rows: int) -> None:
        """The chart's events under it, numbered as on the chart, in the lines a screen ``screen_rows``
        high has for them (`event_lines`)."""
        window = self.window
        # One line an event, so the list stays short at 80 columns: the box cuts each line where it
        # ends (rigmon.tcss), at its width when drawn (it narrows with the terminal: a line cut here
        # at the width it had would wrap then).
        room = event_lines(screen_rows, self.query_one(ReplayBar).position is not None)
        lines = Text()
        shown = list(enumerate(plotted.events, start=1))
        if len(shown) < plotted.window_events or len(shown) > room:
            # What matters most (the chart's own choice, `keep_events`: an incident's start) in time
            # order, and a line counting every event of the window not listed, the chart's too.
            if len(shown) > room - 1:
                kept = keep_events(plotted.events, room - 1)
                shown = [(number, event) for number, event in shown if any(event is k for k in kept)]
            hidden = max(len(plotted.events), plotted.window_events) - len(shown)
        else:
            hidden = 0
        for index, (number, event) in enumerate(shown):
            line = Text(f"{number:>2} {clock_label(event.at, 1.0, window.span_s)} ",
                        style=self.get_component_rich_style(f"history-screen--{event_level(event)}", partial=True))
            line.append_text(plain(event_text(event)))
            if index:
                lines.append("\n")
            lines.append_text(line)
        if hidden:
            lines.append(f"\n   … {hidden} more events in this window")
        events = self.query_one("#history-events", Static)
        events.update(lines if plotted.events else Text("no warning, critical event or mark in this window"))

    def action_back(self) -> None:
        """Back to the screen the history was opened from."""
        self.dismiss(None)

    def action_chart(self, step: int) -> None:
        """Show the next (1) or previous (-1) chart."""
        if self.charts:
            self.chart_index = (self.chart_index + step) % len(self.charts)
            self.fetch()

    def action_zoom(self, step: int) -> None:
        """Zoom out (1) or in (-1) a step, keeping the window's end."""
        self.window = self.window.zoom(step)
        self.fetch()

    def action_pan(self, halves: int) -> None:
        """Move half a window later (1) or earlier (-1)."""
        self._newest_at = self.now()
        self.window = self.window.pan(halves, self._newest_at)
        self.fetch()

    def action_now(self) -> None:
        """Back to the newest data (in a replay, the window follows the cursor again)."""
        self._newest_at = self.now()
        self.window = Window(self._newest_at, self.window.span_s)
        self.fetch()
