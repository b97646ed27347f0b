"""ClusterScreen: every node on one screen, trouble first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Header

from rigmon.cluster.node_view import NodeView
from rigmon.cluster.recording_end import ENDED
from rigmon.tui.key_line import KeyLine
from rigmon.tui.messages import HistoryWanted
from rigmon.tui.widgets.cluster_header import ClusterHeader
from rigmon.tui.widgets.node_row import NodeRow
from rigmon.tui.widgets.replay_bar import ReplayBar

#: Rows above and below the scrolled-to part of the list that are drawn as if on screen (the
#: rows' heights are counted, not measured, so a few more are taken).
VISIBLE_SLACK_ROWS = 3


def _height_changes(row: NodeRow, view: NodeView, ended_at: float | None, note: str | None) -> bool:
    """Whether ``view`` (its recording ended at ``ended_at``, its ``note``) gives ``row`` another height (a
    line for its problems, or for the rest of its reason, or not): then the list's layout changes and the row is
    updated at once, on screen or not."""
    height = NodeRow.height_for(view, ended_at, note, row.size.width, row.short_note)
    return row.styles.height is None or row.styles.height.value != height


class ClusterScreen(Screen[None]):
    """One `NodeRow` per node, sorted so unreachable and stale nodes come first.

    Rows are bound to positions; after a re-sort the cursor follows its node (once the
    operator has moved it; until then it stays on the top row).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("pagedown", "cursor(10)", "Page down", show=False),
        Binding("pageup", "cursor(-10)", "Page up", show=False),
        Binding("home", "cursor(-100000)", "First", show=False),
        Binding("end", "cursor(100000)", "Last", show=False),
        Binding("h", "history", "History"),
    ]

    class OpenNode(Message):
        """The operator wants the node screen of ``key``."""

        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    def __init__(self) -> None:
        super().__init__()
        self._cursor_key: str | None = None
        # Rows off screen given a new view without a repaint: repainted when scrolled to.
        self._unpainted: set[NodeRow] = set()

    def on_mount(self) -> None:
        self.watch(self.query_one("#nodes", VerticalScroll), "scroll_y", self._paint_scrolled_to, init=False)

    def on_resize(self) -> None:
        self._paint_scrolled_to()

    def _on_screen(self, rows: list[NodeRow]) -> range:
        """Indexes of the rows in (or next to) the scrolled-to part of the list."""
        container = self.query_one("#nodes", VerticalScroll)
        top, bottom = container.scroll_y, container.scroll_y + container.size.height
        first, last, y = None, -1, 0
        for index, row in enumerate(rows):
            height = int(row.styles.height.value) if row.styles.height is not None else 2
            if y + height > top and y < bottom:
                first = index if first is None else first
                last = index
            y += height
        if first is None:
            return range(0)
        return range(max(0, first - VISIBLE_SLACK_ROWS), last + 1 + VISIBLE_SLACK_ROWS)

    def _paint_scrolled_to(self, *_: object) -> None:
        if not self._unpainted:
            return
        rows = self._rows()
        for index in self._on_screen(rows):
            if index < len(rows) and rows[index] in self._unpainted:
                self._unpainted.discard(rows[index])
                rows[index].refresh()

    def compose(self) -> ComposeResult:
        yield Header()
        yield ClusterHeader()
        nodes = VerticalScroll(id="nodes")
        # The rows take the focus (the cursor), not their container.
        nodes.can_focus = False
        yield nodes
        yield ReplayBar()
        yield KeyLine()

    def _rows(self) -> list[NodeRow]:
        # The container holds only rows; a plain walk of its children is much cheaper than a
        # query (this runs on every redraw, up to ten times a second).
        return [child for child in self.query_one("#nodes", VerticalScroll).children if isinstance(child, NodeRow)]

    def show(self, views: Sequence[NodeView], ended: Mapping[str, float] | None = None,
             stopped: Mapping[str, bool] | None = None, notes: Mapping[str, str] | None = None,
             short_notes: Mapping[str, str] | None = None) -> None:
        """Draw ``views`` (already in display order); ``ended``: in a replay, the nodes whose recording
        ended before the cursor, by key, with when (`rigmon.cluster.recording_end.recording_ends`);
        ``stopped``: whether their agent stopped cleanly, where the bundle says (`Replay.stopped_cleanly`);
        ``notes``: by key, the nodes at whose URL another agent answers now (`rigmon.cluster.identity.AgentNames`);
        ``short_notes``: the same without the URL (`NodeRow.short_note`)."""
        ended = ended or {}
        stopped = stopped or {}
        notes = notes or {}
        short_notes = short_notes or {}
        rows = self._rows()
        focused = self.focused
        if (isinstance(focused, NodeRow) and focused in rows and focused is not self._cursor_row(rows)
                and focused.view is not None):
            # Moved by other means than the cursor keys (Tab, a click): the cursor is there now.
            self._cursor_key = focused.view.key
        # The worst path's column appears once any node probes peers (a rig of one node has none).
        with_paths = any(v.summary is not None and v.summary.paths is not None for v in views)
        shown = self._on_screen(rows)
        for index, (row, view) in enumerate(zip(rows, views)):
            if row.with_paths != with_paths:
                row.with_paths = with_paths
            ended_at = ended.get(view.key)
            clean = stopped.get(view.key)
            note = notes.get(view.key)
            # Changes only with the note, which redraws the row.
            row.short_note = short_notes.get(view.key)
            # Most rows keep their view object between redraws (see `NodeStore.view`); a node whose
            # recording ended keeps it while the cursor moves on.
            if row.view is view and row.ended_at == ended_at and row.stopped_cleanly == clean and row.note == note:
                continue
            if index in shown or _height_changes(row, view, ended_at, note):
                row.stopped_cleanly = clean
                row.ended_at = ended_at
                row.note = note
                row.view = view
                self._unpainted.discard(row)
            else:
                # Off screen: no repaint now (a repaint of a widget off screen makes Textual lay
                # out every row again, which with 256 nodes cost more than drawing the screen).
                row.set_reactive(NodeRow.ended_at, ended_at)
                row.set_reactive(NodeRow.stopped_cleanly, clean)
                row.set_reactive(NodeRow.note, note)
                row.set_reactive(NodeRow.view, view)
                self._unpainted.add(row)
        container = self.query_one("#nodes", VerticalScroll)
        mounted = len(views) > len(rows)
        if mounted:
            container.mount_all(NodeRow(view, with_paths=with_paths, ended_at=ended.get(view.key),
                                        stopped_cleanly=stopped.get(view.key), note=notes.get(view.key),
                                        short_note=short_notes.get(view.key))
                                for view in views[len(rows):])
        for row in rows[len(views):]:
            self._unpainted.discard(row)
            row.remove()
        counts: dict[str, int] = {}
        for view in views:
            state = ENDED if view.key in ended else view.state
            counts[state] = counts.get(state, 0) + 1
        noun = "node" if len(views) == 1 else "nodes"
        spans = [v.trend_span_s for v in views if v.trend_span_s is not None]
        header = self.query_one(ClusterHeader)
        header.trend_span_s = max(spans) if spans else None
        header.with_paths = with_paths
        self.sub_title = f"{len(views)} {noun}: " + ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
        # The rows kept have their new views now: move the cursor to its node at once, so a
        # key read before the next refresh starts from it. Rows just mounted take it later.
        self._place_cursor(rows[:len(views)])
        if mounted or self.focused is None:
            self.call_after_refresh(self._place_cursor)

    def _cursor_row(self, rows: list[NodeRow]) -> NodeRow | None:
        """The row of the cursor's node; the top row until the operator moves the cursor."""
        found = next((r for r in rows if r.view is not None and r.view.key == self._cursor_key), None)
        return found or (rows[0] if rows else None)

    def _place_cursor(self, rows: list[NodeRow] | None = None) -> None:
        target = self._cursor_row(self._rows() if rows is None else rows)
        if target is None:
            return
        if self.focused is None or (isinstance(self.focused, NodeRow) and self.focused is not target):
            self._focus(target, scroll_visible=self.focused is not None)

    def _focus(self, row: NodeRow, scroll_visible: bool = True) -> None:
        # Screen.set_focus takes effect at once; Widget.focus only queues it, and keys that
        # came in the same read (Home Down Down from tmux or a fast typist) then each started
        # from the row focused before the first of them.
        self.set_focus(row, scroll_visible=scroll_visible)

    def action_cursor(self, step: int) -> None:
        """Move the cursor ``step`` rows (clamped to the list)."""
        rows = self._rows()
        if not rows:
            return
        focused = self.focused
        index = rows.index(focused) if isinstance(focused, NodeRow) and focused in rows else 0
        target = rows[max(0, min(len(rows) - 1, index + step))]
        if target.view is not None:
            self._cursor_key = target.view.key
        self._focus(target)

    def action_history(self) -> None:
        """Open the history view of the node under the cursor."""
        row = self._cursor_row(self._rows())
        if row is not None and row.view is not None:
            self.post_message(HistoryWanted(row.view.key))

    def on_node_row_selected(self, message: NodeRow.Selected) -> None:
        self._cursor_key = message.key
        self.post_message(self.OpenNode(message.key))
