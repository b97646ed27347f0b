"""SourceGroup: base of the node screen's per-source boxes (GPUs, rail, storage, links, host)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from rigmon.schema import Event, Frame
from rigmon.tui import gauge as gauges
from rigmon.tui import row_lines

#: How a figure is judged; picks its ``source-group--*`` style.
Level = Literal["ok", "warn", "bad"]
#: Below this many cells of content a box shortens some cells (an array's md name, a link's
#: expected-speed source) and the GPU table drops its optional columns.
NARROW_WIDTH = 100
#: Cells a wrapping column is counted at when deciding whether a table fits (it wraps below that).
WRAP_FIT_WIDTH = 16


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a box's table: title, right-aligned, fixed width (``None``: by content)."""

    title: str
    right: bool = False
    width: int | None = None
    optional: bool = False
    """Left out when the table does not fit the box (an 80-column terminal)."""
    wrap: bool = False
    """Wrap long cells instead of cutting them (the last column's reasons)."""
    priority: int = 0
    """Optional columns of lower priority are left out first (then the rightmost first)."""


def cell_width(cell: RenderableType) -> int:
    """Cells ``cell`` takes on one line; 0 for renderables that take the width they are given."""
    if isinstance(cell, str):
        return cell_len(cell)
    if isinstance(cell, Text):
        return max((cell_len(line) for line in cell.plain.splitlines()), default=0)
    return 0


def fit_columns(columns: Sequence[Column], rows: Sequence[Sequence[RenderableType]], width: int) -> list[int]:
    """Indexes of the columns to draw in ``width`` cells (all when ``width`` is 0, not laid out yet):
    optional columns go, least priority first, until the others fit at their natural widths."""
    natural = [column_width(c, [row[i] for row in rows]) for i, c in enumerate(columns)]
    keep = list(range(len(columns)))
    if width <= 0:
        return keep
    # A cell has one cell of padding either side (see SourceGroup.table).
    needed = sum(min(natural[i], WRAP_FIT_WIDTH) if columns[i].wrap else natural[i] for i in keep) + 2 * len(keep)
    droppable = sorted((i for i, c in enumerate(columns) if c.optional), key=lambda i: (columns[i].priority, -i))
    for index in droppable:
        if needed <= width:
            break
        keep.remove(index)
        needed -= natural[index] + 2
    return keep


def column_width(column: Column, cells: Sequence[RenderableType]) -> int:
    """The width ``column`` takes uncut: its fixed width, or its widest cell or title."""
    if column.width is not None:
        return column.width
    return max([cell_len(column.title), *(cell_width(cell) for cell in cells)])


class SourceGroup(Widget):
    """A titled box for one source of a node's readings.

    Subclasses set ``TITLE`` and ``COLLECTORS`` (the agent collectors feeding the source)
    and implement `body`; when it returns ``None`` the box says "not present" and what
    the node's collectors say about it. Subclasses with widgets of their own (a
    `DataTable`) compose them in `compose_parts` and fill them in `update_parts`.
    """

    TITLE: ClassVar[str] = ""
    COLLECTORS: ClassVar[tuple[str, ...]] = ()
    PARTS: ClassVar[tuple[tuple[str, str], ...]] = ()
    """Collectors of hardware the box shows part of, with the part's name (``("raid", "md
    arrays")``): a part whose collector says its hardware is absent is named in the node
    screen's "not present" line while the box shows the rest."""
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "source-group--absent",
        "source-group--label",
        "source-group--ok",
        "source-group--warn",
        "source-group--bad",
        "source-group--spark-low",
        "source-group--spark-high",
    }
    DEFAULT_CSS = """
    SourceGroup {
        height: auto;
        layout: vertical;
    }
    SourceGroup > Static {
        height: auto;
    }
    """

    frame: reactive[Frame | None] = reactive(None)
    """The node's latest frame."""
    trends: reactive[dict[str, tuple[float, ...]]] = reactive(dict)
    """Downsampled history of the node by series name (see rigmon.cluster.history.SERIES)."""
    details: reactive[dict[str, tuple[float, ...]]] = reactive(dict)
    """Downsampled per-device history by series name (see rigmon.summary.detail_values)."""
    events: reactive[tuple[Event, ...]] = reactive(tuple)
    """The node's recent events, oldest first."""
    span_s: reactive[float | None] = reactive(None)
    """Seconds the trends cover (shown under the box); ``None`` when unknown."""

    def __init__(self) -> None:
        super().__init__()
        self._redraw_pending = False

    def compose(self) -> ComposeResult:
        yield Static(id="body")
        yield from self.compose_parts()

    def compose_parts(self) -> ComposeResult:
        """Widgets under the body (none by default)."""
        yield from ()

    def on_mount(self) -> None:
        self.border_title = self.TITLE
        self._schedule()

    def watch_frame(self) -> None:
        self._schedule()

    def watch_trends(self) -> None:
        self._schedule()

    def watch_details(self) -> None:
        self._schedule()

    def watch_events(self) -> None:
        self._schedule()

    def watch_span_s(self) -> None:
        label = gauges.span_label(self.span_s)
        self.border_subtitle = f"trends {label}" if label else ""

    def on_resize(self) -> None:
        self._schedule()

    def _schedule(self) -> None:
        # The screen sets frame, trends, details and events together: draw once after them.
        if not self._redraw_pending and self.is_mounted:
            self._redraw_pending = True
            self.call_after_refresh(self.redraw)

    def redraw(self) -> None:
        """Draw the body and the parts from the reactives."""
        self._redraw_pending = False
        frame = self.frame
        absent = self.style_of("absent")
        body: RenderableType | None
        if frame is None:
            body = Text("no data yet", style=absent)
        else:
            body = self.body(frame)
            if body is None and not self.has_parts(frame):
                body = Group(Text("not present", style=absent), Text(self._collector_note(frame), style=absent))
        static = self.query_one("#body", Static)
        static.display = body is not None
        static.update(body if body is not None else "")
        self.update_parts(frame)

    def body(self, frame: Frame) -> RenderableType | None:
        """What the source reports in ``frame``; ``None`` when the node has no such readings."""
        return None

    def absent_parts(self, frame: Frame) -> list[str]:
        """Names of the `PARTS` whose collector reports its hardware absent in ``frame``."""
        return [part for name, part in self.PARTS
                if name in frame.collectors and frame.collectors[name].state == "absent"]

    def has_parts(self, frame: Frame) -> bool:
        """Whether the parts show something for ``frame`` (then a ``None`` body is not "not present")."""
        return False

    def update_parts(self, frame: Frame | None) -> None:
        """Fill the widgets of `compose_parts` (nothing by default)."""

    def style_of(self, name: str) -> Style:
        """The rich style of component class ``source-group--<name>``."""
        return self.get_component_rich_style(f"source-group--{name}", partial=True)

    def styled(self, text: str, level: Level | None) -> Text:
        """``text`` in the style of ``level`` (plain when ``None``)."""
        return Text(text, style=self.style_of(level) if level else "")

    def label(self, text: str) -> Text:
        """``text`` in the label style."""
        return Text(text, style=self.style_of("label"))

    def table(self, columns: Sequence[Column], rows: Sequence[Sequence[RenderableType]]) -> Table:
        """A headed borderless table of ``rows`` without the optional columns that do not fit the box.

        The first column (the device's name) is never squeezed: when even the required
        columns do not fit, the others give way or wrap, so a name is always whole.
        """
        keep = fit_columns(columns, rows, self.content_size.width)
        table = Table(box=None, padding=(0, 1), show_edge=False, header_style=self.style_of("label"))
        for i in keep:
            c = columns[i]
            whole = column_width(c, [row[i] for row in rows]) if i == 0 else None
            table.add_column(c.title, justify="right" if c.right else "left", no_wrap=not c.wrap, width=c.width,
                             min_width=whole, overflow="fold" if c.wrap else "ellipsis")
        for row in rows:
            table.add_row(*(row[i] for i in keep))
        return table

    def sparkline(self, data: Sequence[float], width: int, extreme: str,
                  gauge: gauges.Gauge = gauges.FROM_ZERO) -> RenderableType:
        """A sparkline of ``data`` at most ``width`` cells on ``gauge``'s scale, each bar keeping
        its ``extreme`` and coloured by the gauge's thresholds it crosses; "" when too short."""
        low = self.style_of("spark-low").color
        high = self.style_of("spark-high").color
        if len(data) < 2 or low is None or high is None or width < 1:
            return ""
        return row_lines.Bars(row_lines.sparkline(
            data, min(width, len(data)), low, high, "min" if extreme == "min" else "max", gauge,
            self.style_of("warn").color, self.style_of("bad").color))

    def trend(self, label: str, series: str, extreme: str, figure: str | Text,
              data: Sequence[float] | None = None, gauge: gauges.Gauge | None = None) -> Table:
        """One line: label, current figure, and a sparkline of ``series`` keeping each bar's ``extreme``.

        ``data`` overrides the node trend named ``series`` (a per-device series, say).
        ``gauge`` is the sparkline's scale (default: `rigmon.tui.gauge.for_series` of ``series``).
        """
        width = max(8, self.content_size.width - 26)
        points = self.trends.get(series, ()) if data is None else data
        table = Table.grid(padding=(0, 1))
        table.add_column(width=12, no_wrap=True)
        table.add_column(width=11, justify="right", no_wrap=True)
        table.add_column(width=width, no_wrap=True)
        scale = gauge if gauge is not None else gauges.for_series(series)
        table.add_row(self.label(label), figure, self.sparkline(points, width, extreme, scale))
        return table

    def _collector_note(self, frame: Frame) -> str:
        states = [f"{name}: {frame.collectors[name].state}" for name in self.COLLECTORS if name in frame.collectors]
        if states:
            return "collector " + ", ".join(states)
        return "no such collector on this agent"
