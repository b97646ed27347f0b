"""AlarmTable: alarms of every node, one row per alarm, keyed by alarm and updated in place."""

from __future__ import annotations

import time
from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import DataTable

from rigmon.cluster.alarm_board import AlarmRow
from rigmon.tui.text import plain

#: Columns of the active table and of the resolved table: (key, title). What an operator
#: reads first comes first: the state (firing or pending) is on every row at 80 columns; who
#: acknowledged, since when a dead node's alarm is what it last said, the subject and the rule
#: are past the edge there (the panel under the tables shows the alarm under the cursor in full).
ACTIVE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("severity", "severity"), ("state", "state"), ("node", "node"), ("since", "since UTC"), ("message", "message"),
    ("ack", "ack"), ("as_of", "as of UTC"), ("subject", "subject"), ("rule", "rule"),
)
RESOLVED_COLUMNS: tuple[tuple[str, str], ...] = (
    ("severity", "severity"), ("node", "node"), ("since", "fired UTC"), ("resolved", "resolved UTC"),
    ("message", "message"), ("subject", "subject"), ("rule", "rule"),
)


def utc_clock(at: float | None) -> str:
    """``11-22 08:52:02``: an alarm's own timestamp in UTC to the whole second, like the
    event list, so every node reads the same."""
    return "—" if at is None else time.strftime("%m-%d %H:%M:%S", time.gmtime(at))


def _alarm_keys(row: AlarmRow) -> set[tuple[str, str, str]]:
    """Every alarm of ``row`` as (source, node key, alarm id)."""
    return {(row.source, row.key, alarm.id) for alarm in row.alarms}


class AlarmTable(DataTable[Text]):
    """Active alarms (``resolved=False``) or resolved ones, with severity and state in colour.

    Rows are keyed by `AlarmRow.row_key`: a change of an alarm updates its cells, and the
    cursor stays on its alarm when rows come and go.

    Args:
        resolved: list resolved alarms (fired and resolved times) instead of active ones.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = DataTable.COMPONENT_CLASSES | {
        "alarm-table--critical",
        "alarm-table--warning",
        "alarm-table--info",
        "alarm-table--pending",
        "alarm-table--acked",
        "alarm-table--cluster",
        "alarm-table--old",
    }
    DEFAULT_CSS = """
    AlarmTable {
        height: auto;
        max-height: 50%;
    }
    """

    alarms: reactive[tuple[AlarmRow, ...]] = reactive(tuple, always_update=False)
    """The alarms to list, in display order."""

    def __init__(self, *, resolved: bool = False, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self.resolved = resolved
        self._rows_by_key: dict[str, AlarmRow] = {}
        self.natural_width = 0
        """Cells the table takes with every column whole (the screen compares it with its width)."""

    def on_mount(self) -> None:
        self._add_columns()

    def _add_columns(self) -> None:
        # Alarms may arrive before the mount handler ran; the columns must exist first.
        if not self.columns:
            for key, title in RESOLVED_COLUMNS if self.resolved else ACTIVE_COLUMNS:
                self.add_column(title, key=key)

    def _style(self, name: str) -> str:
        return str(self.get_component_rich_style(f"alarm-table--{name}", partial=True))

    def _cells(self, row: AlarmRow) -> dict[str, Text]:
        a = row.alarm
        rule = plain(", ".join(x.rule for x in row.alarms))
        if row.source == "cluster":
            rule.append(" (cluster)", style=self._style("cluster"))
        cells = {
            "severity": Text(a.severity, style=self._style(a.severity)),
            "state": Text(a.state, style=self._style(a.severity if a.state == "firing" else "pending")),
            "node": plain(row.node),
            "rule": rule,
            "subject": plain(a.subject),
            "since": Text(utc_clock(a.fired_at or a.started_at)),
            "resolved": Text(utc_clock(a.resolved_at)),
            "ack": plain(a.acknowledged_by or ("yes" if a.acknowledged_at else ""), self._style("acked")),
            "message": plain(row.message),
            "as_of": Text(""),
        }
        if row.as_of is not None:
            # A dead node's alarm is what it last said: faint, and dated (as stale figures are drawn).
            cells["as_of"] = Text(utc_clock(row.as_of))
            old = self._style("old")
            for text in cells.values():
                text.stylize(old)
        return cells

    def watch_alarms(self, alarms: tuple[AlarmRow, ...]) -> None:
        self._add_columns()
        columns = [key for key, _ in (RESOLVED_COLUMNS if self.resolved else ACTIVE_COLUMNS)]
        keys = [row.row_key for row in alarms]
        current = [str(r.key.value) for r in self.ordered_rows]
        if keys == current:
            for row in alarms:
                if self._rows_by_key.get(row.row_key) != row:
                    cells = self._cells(row)
                    for column in columns:
                        self.update_cell(row.row_key, column, cells[column], update_width=True)
        else:
            # The cursor follows the alarm the operator moved it to in the table they are in (`x`
            # must not land on another incident). Left on the first row, or in the other table, it
            # starts again from the top, the worst or newest rows, rather than follow a row nobody
            # chose and scroll the alarms that came since out of view.
            follow = self.has_focus and 0 < self.cursor_row < len(current)
            cursor_key = current[self.cursor_row] if follow else None
            self.clear()
            for row in alarms:
                cells = self._cells(row)
                self.add_row(*(cells[c] for c in columns), key=row.row_key)
            if cursor_key in keys:
                self.move_cursor(row=keys.index(cursor_key), animate=False)
            elif cursor_key in self._rows_by_key:
                # The row's lead alarm left it (a rail critical resolved, its warning fires on):
                # stay on the row holding any of its alarms, so `x` does not land on another incident.
                held = _alarm_keys(self._rows_by_key[cursor_key])
                index = next((i for i, row in enumerate(alarms) if held & _alarm_keys(row)), None)
                if index is not None:
                    self.move_cursor(row=index, animate=False)
        self._rows_by_key = {row.row_key: row for row in alarms}
        self.natural_width = self._natural_width(alarms)

    def _natural_width(self, alarms: tuple[AlarmRow, ...]) -> int:
        titles = RESOLVED_COLUMNS if self.resolved else ACTIVE_COLUMNS
        widths = {key: cell_len(title) for key, title in titles}
        for row in alarms:
            for key, cell in self._cells(row).items():
                if key in widths:
                    widths[key] = max(widths[key], cell.cell_len)
        return sum(widths.values()) + 2 * self.cell_padding * len(widths)

    def selected(self) -> AlarmRow | None:
        """The alarm under the cursor, if any."""
        if not self.row_count or not 0 <= self.cursor_row < self.row_count:
            return None
        key = self.ordered_rows[self.cursor_row].key.value
        return self._rows_by_key.get(str(key))
