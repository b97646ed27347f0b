"""NodeRow: one node on the cluster screen, figures on the first line and trends under them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.events import Click
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from rigmon.cluster.incident import joined, reason
from rigmon.cluster.node_view import OUT_OF_TOUCH, NodeView
from rigmon.tui import format as fmt
from rigmon.tui import row_lines
from rigmon.tui.guard_marks import mark_style
from rigmon.tui.recording_end import ended_text
from rigmon.tui.row_columns import (
    TRENDS,
    Column,
    column_widths,
    columns_for,
    figure_level,
    grid,
    name_label,
    out_of_touch,
    path_figure,
    path_label,
    rail_figure,
    trend_gauge,
)
from rigmon.tui.text import plain

#: Before the rest of an out-of-touch node's state on the row's third line (`NodeRow.wraps`).
WRAP_INDENT = "  "


def touch_words(view: NodeView, style: Style | str = "") -> Text:
    """What a node out of touch says on its row: its state, the age of its data and why (``unreachable, last data
    8s ago: cannot connect: connection refused``), the state in ``style``; the reason as plain text."""
    state = Text(view.state, style=style)
    state.append(", no data yet" if view.age_s is None else f", last data {fmt.age(view.age_s)} ago")
    if view.reason:
        state.append(": ").append(plain(view.reason))
    return state


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
        "node-row--guard-off",
        "node-row--guard-dry",
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

    def on_resize(self) -> None:
        self._fit_height()

    def _fit_height(self) -> None:
        height = self.height_for(self.view, self.ended_at, self.note, self.size.width, self.short_note)
        if self.styles.height is None or self.styles.height.value != height:
            self.styles.height = height

    @staticmethod
    def height_for(view: NodeView | None, ended_at: float | None = None, note: str | None = None,
                   width: int = 0, short_note: str | None = None) -> int:
        """Lines a row ``width`` cells wide takes for ``view``: a third says why the node is in trouble, or that
        another agent answers at its URL (``note``, unless it is out of touch: its state line says it then), or
        goes on with the state line of a node out of touch whose reason does not fit one line (`wraps`);
        healthy rows take two. ``width`` 0: not laid out yet (no wrapping counted)."""
        third = NodeRow.shows_reason(view, ended_at) or (
            note is not None and view is not None and not out_of_touch(view, ended_at)) or (
            NodeRow.wraps(view, ended_at, note, width, short_note))
        return 3 if third else 2

    @staticmethod
    def wraps(view: NodeView | None, ended_at: float | None, note: str | None, width: int,
              short_note: str | None = None) -> bool:
        """Whether the state line of a node out of touch (``unreachable, no data yet: HTTP 400: this agent
        serves HTTPS, ... use an https:// URL ...``) goes on to a third line in a row ``width`` cells wide: the
        end of a reason is often what to do (a 401's where the token was given, an HTTPS agent's https://
        URL), and cut at the edge of 80 columns it was lost."""
        if view is None or width <= 0 or ended_at is not None or view.state not in OUT_OF_TOUCH:
            return False
        cells = touch_words(view).cell_len
        if note is not None:
            cells += 2 + min(cell_len(note), cell_len(short_note or note))
        if view.summary is not None and view.summary.guard_mark:
            cells += 1 + cell_len(view.summary.guard_mark)
        return cells > width

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
                 stopped_cleanly: bool | None = None, note: str | None = None, short_note: str | None = None,
                 id: str | None = None) -> None:
        super().__init__(id=id)
        #: `note` without the URL (``another agent at the node's URL: now node gpu07 (was node01)``): said instead
        #: when the whole note does not fit its line, so that the names are not what is cut (set with `note`).
        self.short_note = short_note
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
            state = touch_words(view, self._style(view.state))
            if self.note:
                state.append("; ").append(plain(self._fitting_note(self.size.width - state.cell_len - 2),
                                                self._style("note")))
        if summary is not None and summary.guard_mark:
            # The undervolt guard's mark (`guard_mark`): G1 capped, G1? holding blind, dry1 would cap, G0h held,
            # Goff released, G! stuck caps; each drawn as what it is (`rigmon.tui.guard_marks`).
            state.append(f" {summary.guard_mark}", style=self._style(mark_style(summary.guard_mark)))
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
        bottom = [] if trouble else [*row_lines.text_cell(state, widths[0]), row_lines.GAP,
                                     row_lines.cell("", None, widths[1])]
        low = self._style("spark-low").color
        high = self._style("spark-high").color
        warn = self._style("warn").color
        bad = self._style("bad").color
        for column, width in zip(columns[2:], widths[2:]):
            text = figures[column.key]
            top.append(row_lines.GAP)
            level = figure_level(column.key, summary, view.arrays_unknown)
            top.append(row_lines.cell(text, self._figure_style(text, level, trouble), width, "right"))
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
            return row_lines.RowLines([top], self._state_lines(view, state))
        return row_lines.RowLines([top, bottom], self._reason(view))

    def _wraps(self, view: NodeView) -> bool:
        return self.wraps(view, self.ended_at, self.note, self.size.width, self.short_note)

    def _state_lines(self, view: NodeView, state: Text) -> Text:
        """The state line of a node out of touch, cut at the row's width; when it `wraps`, on two lines: broken
        at the last space that fits (mid-word only when a word would leave the first line half empty), the
        rest under it after `WRAP_INDENT`, cut at the edge."""
        width = max(1, self.size.width)
        if not self._wraps(view) or state.cell_len <= width:
            state.truncate(width, overflow="ellipsis")
            return state
        text = state.plain
        fits = 0
        while fits < len(text) and cell_len(text[:fits + 1]) <= width:
            fits += 1
        space = text.rfind(" ", 0, fits + 1)
        cut, skip = (space, 1) if space > width // 2 else (fits, 0)
        first, rest = state[:cut], state[cut + skip:]
        second = Text(WRAP_INDENT, style=self._style(view.state)).append_text(rest)
        second.truncate(width, overflow="ellipsis")
        first.truncate(width)
        return Text("\n", no_wrap=True).join([first, second])

    def _reason(self, view: NodeView) -> Text | None:
        """The third line: that another agent answers at the node's URL (`note`), then what is wrong, worst
        first, in the colour of the worst problem."""
        if self.height_for(view, self.ended_at, self.note) < 3:
            return None
        text = Text("  ↳ ", style=self._style("missing"))
        if self.note:
            text.append_text(plain(self._fitting_note(self.size.width - text.cell_len), self._style("note")))
            if not self.shows_reason(view, self.ended_at):
                text.truncate(max(1, self.size.width), overflow="ellipsis")
                return text
            text.append("; ", style=self._style("missing"))
        worst = view.problems[0]
        room = self.size.width - text.cell_len
        # As many problems as fit whole (then "+N more"); the worst alone is cut if it must be.
        why = next((r for r in (reason(view.problems, n) for n in (2, 1)) if cell_len(r) <= room), None)
        if why is None:
            why = self._cut_worst(view, room)
        text.append_text(plain(why, self._style("bad" if worst.level == "bad" else "warn")))
        text.truncate(max(1, self.size.width), overflow="ellipsis")
        return text

    @staticmethod
    def _cut_worst(view: NodeView, room: int) -> str:
        """The worst problem cut with an ellipsis to ``room`` cells less its ``(+N more)``, which stays whole:
        cut, the count would hide that there is more wrong than the words on screen say."""
        more = reason(view.problems, 1).removeprefix(joined(view.problems[:1]))
        worst = Text(joined(view.problems[:1]))
        worst.truncate(max(1, room - cell_len(more)), overflow="ellipsis")
        return worst.plain + more

    def _fitting_note(self, room: int) -> str | None:
        """`note` when it fits in ``room`` cells, else `short_note` (when there is one)."""
        note = self.note
        if note is None or self.short_note is None or cell_len(note) <= room:
            return note
        return self.short_note

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
            top.append(self._figure(figures[column.key], figure_level(column.key, summary, view.arrays_unknown), trouble))
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
            return Group(table, self._state_lines(view, state))
        table.add_row(*bottom)
        why = self._reason(view)
        return table if why is None else Group(table, why)
