"""NodeRow: one node on the cluster screen, figures on the first line and trends under them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.console import Group, RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.events import Click
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from rigmon.cluster.incident import reason, rtt
from rigmon.cluster.node_view import OUT_OF_TOUCH, NodeView
from rigmon.summary import RAIL_CRITICAL_VOLTS, RAIL_WARN_VOLTS, NodeSummary, PathCell, power_level
from rigmon.tui import format as fmt
from rigmon.tui import gauge, row_lines
from rigmon.tui.recording_end import ended_text
from rigmon.tui.text import plain


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the cluster table: title, least width, share of spare width."""

    key: str
    title: str
    min_width: int
    ratio: int = 0


#: Columns of the cluster screen; the header and every row lay out from this.
COLUMNS: tuple[Column, ...] = (
    Column("node", "node", 18, 2),
    Column("alarms", "⚠", 3),
    Column("rail", "rail 60s", 8, 1),
    Column("power", "GPU W", 7, 1),
    Column("gpus", "GPUs", 5),
    Column("links", "links", 5),
    Column("storage", "storage", 9, 1),
    Column("cpu", "CPU", 5, 1),
    Column("net", "net", 9, 1),
)
#: The worst peer path's column, shown when any node probes peers (after ``links``).
PATH_COLUMN = Column("path", "path", 6, 1)
#: Columns when a node probes peers and the screen is wide enough for all of them.
COLUMNS_WITH_PATH: tuple[Column, ...] = (*COLUMNS[:6], PATH_COLUMN, *COLUMNS[6:])
#: Columns with peer paths at 80 columns: the CPU column gives way to the path (for tensor
#: parallelism the round trip between nodes says more than CPU busy), the name is narrower.
COLUMNS_WITH_PATH_NARROW: tuple[Column, ...] = (
    Column("node", "node", 16, 2), *COLUMNS[1:6], PATH_COLUMN, COLUMNS[6], COLUMNS[8])


def least_width(columns: Sequence[Column]) -> int:
    """Cells ``columns`` need at their least widths, with one space between neighbours."""
    return sum(c.min_width for c in columns) + len(columns) - 1


def columns_for(width: int, paths: bool) -> tuple[Column, ...]:
    """The cluster table's columns in ``width`` cells: `COLUMNS`, with the worst peer path's
    column when ``paths`` (some node probes peers), dropping CPU when that does not fit."""
    if not paths:
        return COLUMNS
    return COLUMNS_WITH_PATH if least_width(COLUMNS_WITH_PATH) <= width else COLUMNS_WITH_PATH_NARROW


def path_figure(cell: PathCell | None) -> str:
    """The path column's figure: ``silent`` (``badkey`` when the keys differ, as in the link
    matrix), else the p99 round trip (``850 µs``); ``—`` unknown."""
    if cell is None:
        return fmt.MISSING
    if cell.state == "silent":
        return "badkey" if cell.key_mismatch else "silent"
    return fmt.MISSING if cell.rtt_p99_us is None else rtt(cell.rtt_p99_us)


def path_label(cell: PathCell | None, width: int) -> str:
    """Under the path figure: which path it is (``tbnet→node03``), the peer alone when narrow."""
    if cell is None:
        return ""
    full = f"{cell.path}→{cell.peer}"
    return full if cell_len(full) <= width else cell.peer


def name_label(view: NodeView, width: int) -> str:
    """The name cell in ``width`` cells: the node's label (its name, with its key when other
    followed agents share the name: ``node01 (http://10.0.0.2:9871)``). A label too wide keeps
    the end of its key, where two agents of one name differ (``node01 (…0.0.2:9871)``)."""
    label = view.label or view.name
    if label == view.name or cell_len(label) <= width:
        return label
    # " (", "…" and ")" around the key's end; at least its last few characters (the port).
    suffix = f" (…{view.key[-max(6, width - cell_len(view.name) - 4):]})"
    room = width - cell_len(suffix)
    head = view.name if cell_len(view.name) <= room else set_cell_size(view.name, max(0, room - 1)) + "…"
    return head + suffix


#: Frames the cluster rows' trends cover (ten minutes at one frame a second: a sag stays in
#: sight long after its alarm's toast is gone), and the points they are reduced to first.
ROW_TREND_POINTS = 600
ROW_TREND_BUCKETS = 120
#: Trend drawn under a column: (series name, summary each sparkline bar keeps).
TRENDS: dict[str, tuple[str, str]] = {
    "rail": ("rail_min_volts", "min"),
    "power": ("gpu_power_w", "max"),
    "storage": ("storage_bytes_per_s", "max"),
    "cpu": ("cpu_pct", "max"),
    "net": ("net_bytes_per_s", "max"),
}


def trend_gauge(column: str, view: NodeView) -> gauge.Gauge:
    """The scale of a column's trend: the rail on its fixed band with the alarm thresholds,
    GPU power from 0 to the GPUs' power limits, CPU 0-100 %, throughput from 0."""
    if column == "rail":
        return gauge.RAIL
    if column == "power":
        return gauge.power(view.gpu_power_limit_w)
    if column == "cpu":
        return gauge.PERCENT
    return gauge.FROM_ZERO


def column_widths(total: int, columns: Sequence[Column] = COLUMNS) -> list[int]:
    """Share ``total`` cells between ``columns`` (one space between neighbours)."""
    widths = [c.min_width for c in columns]
    spare = total - sum(widths) - (len(columns) - 1)
    ratios = sum(c.ratio for c in columns)
    if spare > 0 and ratios:
        given = 0
        for index, column in enumerate(columns):
            extra = spare * column.ratio // ratios
            widths[index] += extra
            given += extra
        widths[0] += spare - given
    return widths


def rail_figure(summary: NodeSummary | None) -> float | None:
    """The rail column's figure: the lowest rail minimum of the last `WORST_WINDOW_S`
    (the newest frame's before the window has a point)."""
    if summary is None:
        return None
    return summary.rail_worst_volts if summary.rail_worst_volts is not None else summary.rail_min_volts


def figure_level(column: str, summary: NodeSummary | None) -> str | None:
    """``bad`` or ``warn`` when a column's figure shows trouble: a rail minimum of the last
    60 s below the alarm thresholds, a GPU missing, a link down (amber: only slow), an md array degraded, a link
    unhealthy within the last 60 s though healthy now (it flaps), GPU peaks of the last 60 s far over the
    power limit, a peer path silent (red while it still is) or degraded within the last 60 s."""
    if summary is None:
        return None
    rail = rail_figure(summary)
    if column == "rail" and rail is not None:
        if rail < RAIL_CRITICAL_VOLTS:
            return "bad"
        return "warn" if rail < RAIL_WARN_VOLTS else None
    if column == "gpus" and summary.gpus_present is not None and summary.gpus_expected is not None:
        return "bad" if summary.gpus_present < summary.gpus_expected else None
    if column == "links" and summary.links_healthy is not None and summary.links_total is not None:
        if summary.links_healthy < summary.links_total:
            # Red for a link down; amber when every link not healthy is up but slow (USB4 at 20
            # of 40 Gb/s). An agent that does not say which is which: each may be down.
            down = summary.links_total - summary.links_healthy - (summary.links_slow or 0)
            return "bad" if down > 0 else "warn"
        # Healthy now but not within the last 60 s: a link that flaps.
        return "warn" if summary.links_unhealthy_worst else None
    if column == "power" and summary.gpu_peak_worst_w is not None:
        # A brief V100 peak over its limit is normal; peaks far over it in the last 60 s are not.
        return "warn" if power_level(None, summary.gpu_peak_worst_w, summary.gpu_peak_limit_w) else None
    if column == "storage" and summary.arrays_degraded:
        return "bad"
    if column == "path" and summary.path_worst is not None:
        worst = summary.path_worst
        now = summary.paths.worst if summary.paths is not None else None
        if worst.state == "silent":
            # Silent now: red; silent within the last 60 s but answering again: amber.
            return "bad" if now is not None and now.state == "silent" else "warn"
        return "warn" if worst.state == "degraded" else None
    return None


def out_of_touch(view: NodeView, ended_at: float | None) -> bool:
    """Whether a row's figures are not current: the node is stale or unreachable, or its recording
    ended (``ended_at``); its second line then says so instead of trends, and the figures are faint."""
    return ended_at is not None or view.state in OUT_OF_TOUCH


def grid(widths: Sequence[int]) -> Table:
    """An empty borderless table with the given column widths."""
    table = Table.grid(padding=(0, 1), expand=False)
    for width in widths:
        table.add_column(width=width, no_wrap=True, overflow="ellipsis")
    return table


class NodeRow(Widget, can_focus=True):
    """One node: name and state, alarms, key figures, and trends of rail, power, storage, CPU, net.

    Enter or a click posts `NodeRow.Selected`.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "node-row--name",
        "node-row--live",
        "node-row--stale",
        "node-row--unreachable",
        "node-row--refused",
        "node-row--connecting",
        "node-row--ended",
        "node-row--alarm",
        "node-row--alarm-warning",
        "node-row--alarm-info",
        "node-row--missing",
        "node-row--warn",
        "node-row--bad",
        "node-row--spark-low",
        "node-row--spark-high",
        "node-row--old",
        "node-row--note",
    }
    DEFAULT_CSS = """
    NodeRow {
        height: 2;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select", "Open node")]

    view: reactive[NodeView | None] = reactive(None)
    """The node to draw; a fresh `NodeView` on every refresh."""
    with_paths: reactive[bool] = reactive(False)
    """Whether the table has the worst peer path's column (some node of the screen probes peers)."""
    ended_at: reactive[float | None] = reactive(None)
    """In a replay, when the node's recording ended before the cursor (its last frame's ``taken_at``,
    see `rigmon.tui.recording_end`); ``None`` live and while its frames go on."""
    stopped_cleanly: reactive[bool | None] = reactive(None)
    """In a replay, whether the node's agent stopped cleanly when its bundle says (a journal's bundle,
    `rigmon.cluster.replay.Replay.stopped_cleanly`): said after "recording ended"; ``None`` when it does not."""
    note: reactive[str | None] = reactive(None)
    """Another agent answers at the node's URL than before (``the agent at URL now says it is node gpu07
    (was node01)``, `rigmon.cluster.identity.AgentNames`); ``None``: none. Said on the third line, before
    the node's problems (or after its state, when out of touch)."""

    def watch_view(self, view: NodeView | None) -> None:
        self._fit_height()

    def watch_ended_at(self, ended_at: float | None) -> None:
        self._fit_height()

    def watch_note(self, note: str | None) -> None:
        self._fit_height()

    def _fit_height(self) -> None:
        height = self.height_for(self.view, self.ended_at, self.note)
        if self.styles.height is None or self.styles.height.value != height:
            self.styles.height = height

    @staticmethod
    def height_for(view: NodeView | None, ended_at: float | None = None, note: str | None = None) -> int:
        """Lines a row takes for ``view``: a third says why the node is in trouble, or that another agent
        answers at its URL (``note``, unless it is out of touch: its state line says it then); healthy rows
        take two."""
        third = NodeRow.shows_reason(view, ended_at) or (
            note is not None and view is not None and not out_of_touch(view, ended_at))
        return 3 if third else 2

    @staticmethod
    def shows_reason(view: NodeView | None, ended_at: float | None = None) -> bool:
        """Whether a row for ``view`` has the third line, saying what is wrong (not for a stale or unreachable
        node, nor one whose recording ended at ``ended_at``: what was wrong is as of its last frame)."""
        return view is not None and bool(view.problems) and not out_of_touch(view, ended_at)

    class Selected(Message):
        """The operator chose this row's node."""

        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    def __init__(self, view: NodeView | None = None, *, with_paths: bool = False, ended_at: float | None = None,
                 stopped_cleanly: bool | None = None, note: str | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.set_reactive(NodeRow.view, view)
        self.set_reactive(NodeRow.note, note)
        self.set_reactive(NodeRow.with_paths, with_paths)
        self.set_reactive(NodeRow.ended_at, ended_at)
        self.set_reactive(NodeRow.stopped_cleanly, stopped_cleanly)
        # Component styles by name, for the theme they were read under. Textual drops its own
        # cache of them on every refresh, and a row is refreshed for each of its node's frames.
        self._styles: dict[str, Style] = {}
        self._styles_theme: str | None = None

    def on_mount(self) -> None:
        self.watch_view(self.view)

    def action_select(self) -> None:
        """Open the node."""
        if self.view is not None:
            self.post_message(self.Selected(self.view.key))

    def on_click(self, event: Click) -> None:
        self.focus()
        self.action_select()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()

    def _style(self, name: str) -> Style:
        if self._styles_theme != self.app.theme:
            self._styles.clear()
            self._styles_theme = self.app.theme
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = self.get_component_rich_style(f"node-row--{name}", partial=True)
        return style

    def _figure(self, text: str, level: str | None = None, old: bool = False) -> Text:
        return Text(text, style=self._figure_style(text, level, old) or "", justify="right")

    def render(self) -> RenderableType:
        view = self.view
        if view is None:
            return ""
        width = self.size.width
        columns = columns_for(width, self.with_paths)
        widths = column_widths(width, columns)
        if sum(widths) + len(widths) - 1 > width:
            # Too narrow for every column's least width: the table squeezes them.
            return self._render_table(view, columns, widths)
        return self._render_lines(view, columns, widths)

    def _figures(self, view: NodeView, name_width: int) -> tuple[Text, Text, Text, dict[str, str]]:
        """Name (in ``name_width`` cells), state (with what is wrong when the node is in trouble),
        alarm count, and the columns' figures."""
        summary = view.summary
        name = plain(name_label(view, name_width), self._style("name"))
        state = Text(view.state, style=self._style(view.state))
        if self.ended_at is not None:
            # Its figures are its last frame's; not stale: the bundle cannot tell it from a clock behind.
            state = Text(ended_text(self.ended_at, self.stopped_cleanly), style=self._style("ended"))
        elif view.state in OUT_OF_TOUCH:
            state.append(", no data yet" if view.age_s is None else f", last data {fmt.age(view.age_s)} ago")
            if view.reason:
                state.append(": ").append(plain(view.reason))
            if self.note:
                state.append("; ").append(plain(self.note, self._style("note")))
        if summary is not None and summary.guard_mark:
            # The undervolt guard capped this node's GPUs (G: enforced, g: dry-run; h: held).
            state.append(f" {summary.guard_mark}", style=self._style("alarm"))
        alarms = summary.alarms if summary else None
        severity = summary.alarms_severity if summary else None
        # Coloured by the worst alarm it counts: red for a critical one, amber for warnings only.
        alarm_style = (self._style("alarm") if severity == "critical" or (alarms and severity is None)
                       else self._style(f"alarm-{severity}") if alarms and severity in ("warning", "info")
                       else self._style("missing") if alarms is None else "")
        alarm_text = Text(fmt.MISSING if alarms is None else str(alarms), justify="right", style=alarm_style)
        figures = {
            "rail": fmt.rail(rail_figure(summary)),
            "power": fmt.watts(summary.gpu_power_w if summary else None),
            "gpus": fmt.of(summary.gpus_present, summary.gpus_expected) if summary else fmt.MISSING,
            "links": fmt.of(summary.links_healthy, summary.links_total) if summary else fmt.MISSING,
            "storage": fmt.rate(summary.storage_bytes_per_s if summary else None),
            "cpu": fmt.pct(summary.cpu_pct if summary else None),
            "net": fmt.rate(summary.net_bytes_per_s if summary else None),
            "path": path_figure(summary.path_worst if summary else None),
        }
        return name, state, alarm_text, figures

    def _render_lines(self, view: NodeView, columns: Sequence[Column], widths: list[int]) -> RenderableType:
        """The row as segments (every column at its full width); see `rigmon.tui.row_lines`."""
        summary = view.summary
        name, state, alarm_text, figures = self._figures(view, widths[0])
        # A node in trouble gets the whole second line for what is wrong instead of trends.
        trouble = out_of_touch(view, self.ended_at)
        top = [row_lines.cell(name.plain, self._style("name"), widths[0]), row_lines.GAP,
               row_lines.cell(alarm_text.plain, alarm_text.style if isinstance(alarm_text.style, Style) else None,
                              widths[1], "right")]
        bottom = [] if trouble else [row_lines.cell(state.plain, self._style(view.state), widths[0]), row_lines.GAP,
                                     row_lines.cell("", None, widths[1])]
        low = self._style("spark-low").color
        high = self._style("spark-high").color
        warn = self._style("warn").color
        bad = self._style("bad").color
        for column, width in zip(columns[2:], widths[2:]):
            text = figures[column.key]
            top.append(row_lines.GAP)
            top.append(row_lines.cell(text, self._figure_style(text, figure_level(column.key, summary), trouble),
                                      width, "right"))
            if trouble:
                continue
            bottom.append(row_lines.GAP)
            if column.key == "path":
                label = path_label(summary.path_worst if summary else None, width)
                bottom.append(row_lines.cell(label, self._style("missing"), width, "right"))
                continue
            trend = TRENDS.get(column.key)
            data = view.trends.get(trend[0], ()) if trend else ()
            if trend and len(data) > 1 and low is not None and high is not None:
                bars = min(width, len(data))
                bottom.extend(row_lines.sparkline(data, bars, low, high, "min" if trend[1] == "min" else "max",
                                                  trend_gauge(column.key, view), warn, bad))
                if width > bars:
                    bottom.append(Segment(" " * (width - bars)))
            else:
                bottom.append(row_lines.cell("", None, width))
        if trouble:
            state.truncate(self.size.width, overflow="ellipsis")
            return row_lines.RowLines([top], state)
        return row_lines.RowLines([top, bottom], self._reason(view))

    def _reason(self, view: NodeView) -> Text | None:
        """The third line: that another agent answers at the node's URL (`note`), then what is wrong, worst
        first, in the colour of the worst problem."""
        if self.height_for(view, self.ended_at, self.note) < 3:
            return None
        text = Text("  ↳ ", style=self._style("missing"))
        if self.note:
            text.append_text(plain(self.note, self._style("note")))
            if not self.shows_reason(view, self.ended_at):
                text.truncate(max(1, self.size.width), overflow="ellipsis")
                return text
            text.append("; ", style=self._style("missing"))
        worst = view.problems[0]
        room = self.size.width - text.cell_len
        # As many problems as fit whole (then "+N more"); the worst alone is cut if it must be.
        why = next((r for r in (reason(view.problems, n) for n in (2, 1)) if cell_len(r) <= room),
                   reason(view.problems, 1))
        text.append_text(plain(why, self._style("bad" if worst.level == "bad" else "warn")))
        text.truncate(max(1, self.size.width), overflow="ellipsis")
        return text

    def _figure_style(self, text: str, level: str | None, old: bool = False) -> Style | None:
        """A figure's style; ``old``: the node is stale or unreachable, so the figure is its last
        frame's, drawn faint (its colour kept: a dead node's last rail minimum is evidence)."""
        if text == fmt.MISSING:
            style: Style | None = self._style("missing")
        else:
            style = self._style(level) if level else None
        if old:
            style = self._style("old") if style is None else style + self._style("old")
        return style

    def _render_table(self, view: NodeView, columns: Sequence[Column], widths: list[int]) -> RenderableType:
        """The row as a Rich table, which squeezes columns that do not fit."""
        summary = view.summary
        name, state, alarm_text, figures = self._figures(view, widths[0])
        trouble = out_of_touch(view, self.ended_at)
        table = grid(widths)
        top: list[RenderableType] = [name, alarm_text]
        bottom: list[RenderableType] = [state, ""]
        low = self._style("spark-low").color
        high = self._style("spark-high").color
        warn = self._style("warn").color
        bad = self._style("bad").color
        for column, width in zip(columns[2:], widths[2:]):
            top.append(self._figure(figures[column.key], figure_level(column.key, summary), trouble))
            if column.key == "path":
                label = path_label(summary.path_worst if summary else None, width)
                bottom.append(Text(label, style=self._style("missing"), justify="right"))
                continue
            trend = TRENDS.get(column.key)
            data = view.trends.get(trend[0], ()) if trend else ()
            if trend and len(data) > 1 and low is not None and high is not None:
                bottom.append(row_lines.Bars(row_lines.sparkline(
                    data, min(width, len(data)), low, high, "min" if trend[1] == "min" else "max",
                    trend_gauge(column.key, view), warn, bad)))
            else:
                bottom.append("")
        table.add_row(*top)
        if trouble:
            state.truncate(self.size.width, overflow="ellipsis")
            return Group(table, state)
        table.add_row(*bottom)
        why = self._reason(view)
        return table if why is None else Group(table, why)
