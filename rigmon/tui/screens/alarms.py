"""AlarmsScreen: active and resolved alarms of every followed node, and the cluster rules' own."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Header, Label, Static

from rigmon.cluster.alarm_board import AlarmBoardView, AlarmRow
from rigmon.tui.key_line import KeyLine
from rigmon.tui.text import notify, plain
from rigmon.tui.widgets.alarm_detail import AlarmDetail
from rigmon.tui.widgets.alarm_table import AlarmTable
from rigmon.tui.widgets.replay_bar import ReplayBar

#: Cells a table's vertical scrollbar takes (Textual's default size).
SCROLLBAR_CELLS = 2


def summary_line(board: AlarmBoardView) -> Text:
    """``4 rows · 3 firing (5 alarms): 1 critical, 2 warning (1 as last heard) · 1 pending · alarms unknown on
    node05, ...``; ``3 firing rows: ...`` when no row is pending, ``nothing firing · 1 pending`` when none fires.

    It counts rows as the tables list them (one per incident: `group_rows`), by the severity each
    row shows; the alarms those firing rows join are said in parentheses when there are more. Its first
    figure is always the rows listed: pending rows are rows too ("2 firing rows" above three read as a miscount).
    """
    firing = sum(board.firing.values())
    pending = sum(1 for r in board.active if r.alarm.state == "pending")  # rows, like the firing ones
    if firing and pending:
        text = Text(f"{firing + pending} rows · {firing} firing")
    else:
        text = Text(f"{firing} firing {'row' if firing == 1 else 'rows'}" if firing else "nothing firing")
    if board.firing_alarms > firing:
        text.append(f" ({board.firing_alarms} alarms)")
    if firing:
        text.append(": " + ", ".join(f"{board.firing[s]} {s}" for s in ("critical", "warning", "info")
                                     if board.firing.get(s)))
    if board.firing_as_of:
        # Those of nodes that stopped answering may have ended since: not counted as current.
        text.append(f" ({board.firing_as_of} as last heard)")
    if pending:
        text.append(f" · {pending} pending")
    by_reason: dict[str, list[str]] = {}
    for node, reason in sorted(board.errors.items()):
        by_reason.setdefault(reason, []).append(node)
    for reason, nodes in by_reason.items():
        text.append(" · alarms unknown on ").append(plain(", ".join(nodes))).append(": ").append(plain(reason))
    for note in board.notes:
        text.append(" · ").append(plain(note))
    return text


class AlarmsScreen(Screen[None]):
    """Active alarms first (firing, worst, newest), then the resolved ones; ``x`` acknowledges."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("x", "acknowledge", "Acknowledge"),
        Binding("enter", "open_node", "Open node"),
        Binding("escape", "back", "Back"),
        # The app's key for this very screen: not offered here, so that the app's keys after it (the theme's)
        # are not cut from the key line at 80 columns.
        Binding("a", "app.show_mode('alarms')", "Alarms", show=False),
    ]

    class Acknowledge(Message):
        """The operator acknowledges ``row``'s alarm."""

        def __init__(self, row: AlarmRow) -> None:
            super().__init__()
            self.row = row

    class OpenNode(Message):
        """The operator wants the node screen of ``key``."""

        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    class Back(Message):
        """The operator wants the cluster screen again."""

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="alarms-body"):
            yield Static(id="alarm-summary")
            yield Label("Active", classes="alarm-heading")
            yield AlarmTable(id="active-alarms")
            yield Label("Resolved", classes="alarm-heading")
            yield AlarmTable(resolved=True, id="recent-alarms")
        yield AlarmDetail()
        yield ReplayBar()
        yield KeyLine()

    def on_mount(self) -> None:
        self.query_one("#active-alarms", AlarmTable).focus()

    def show(self, board: AlarmBoardView) -> None:
        """Draw the alarms of every node."""
        self.sub_title = "alarms"
        self.query_one("#alarm-summary", Static).update(summary_line(board))
        self.query_one("#active-alarms", AlarmTable).alarms = board.active
        self.query_one("#recent-alarms", AlarmTable).alarms = board.recent
        self._describe()

    def on_resize(self) -> None:
        # After the layout, so the body's width is the new one.
        self.call_after_refresh(self._describe)

    def on_data_table_row_highlighted(self, event: AlarmTable.RowHighlighted) -> None:
        self._describe()

    def on_descendant_focus(self) -> None:
        # Tab between the tables: describe the alarm under the cursor of the one focused now.
        self._describe()

    def _describe(self) -> None:
        """Show the alarm under the cursor in full below the tables when a table is too
        narrow for all its columns (the message and ack columns are the first cut off)."""
        detail = self.query_one(AlarmDetail)
        width = self.query_one("#alarms-body", Vertical).content_size.width
        tables = self.query(AlarmTable)
        # Room for the vertical scrollbar a long table gets.
        detail.display = width > 0 and any(t.natural_width + SCROLLBAR_CELLS > width for t in tables)
        detail.row = self._selected()

    def _selected(self) -> AlarmRow | None:
        focused = self.focused
        table = focused if isinstance(focused, AlarmTable) else self.query_one("#active-alarms", AlarmTable)
        if not table.row_count:
            # Nothing firing (the cursor's table is empty): the panel tells the alarm under the other
            # table's cursor, the newest resolved one, rather than nothing while its message is cut.
            table = next((t for t in self.query(AlarmTable) if t is not table), table)
        return table.selected()

    def action_acknowledge(self) -> None:
        """Acknowledge the alarm under the cursor (active alarms only)."""
        row = self._selected()
        if row is None or row.alarm.state == "resolved":
            notify(self, "no active alarm selected", severity="warning", timeout=3)
            return
        self.post_message(self.Acknowledge(row))

    def on_data_table_row_selected(self, event: AlarmTable.RowSelected) -> None:
        # Enter on a table row (the table's own binding) opens that alarm's node.
        event.stop()
        self.action_open_node()

    def action_open_node(self) -> None:
        """Open the node of the alarm under the cursor."""
        row = self._selected()
        if row is not None and row.key:
            self.post_message(self.OpenNode(row.key))

    def action_back(self) -> None:
        """Back to the cluster screen."""
        self.post_message(self.Back())
