"""AlarmTable: alarms of every node, one row per alarm, keyed by alarm and updated in place."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import accumulate
from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import DataTable

from rigmon.cluster.alarm_board import AlarmRow
from rigmon.tui.text import plain

#: Columns of the active table and of the resolved table: (key, title). What an operator
#: reads first comes first: the state (firing or pending, ✓ once acknowledged) is on every row
#: at 80 columns, as is the resolved time (✓ once acknowledged); the ack column, since when a
#: dead node's alarm is what it last said, the subject and the rule are past the edge there
#: (the state or resolved cells name who acknowledged; the panel under the tables shows the
#: alarm under the cursor in full), and a message longer than the room left to the edge is cut there
#: with an ellipsis (`AlarmTable._edge_cells`). Wider, a grouped row's rules and then the message are
#: cut to keep them on screen (`fitted_cells`). Where they cannot all be on screen and the message
#: would keep fewer than `MESSAGE_MIN_CELLS` (a long node name at 80 columns), a long node name is cut,
#: and if that is not enough the since (fired) column goes after the message (`NARROW_STEPS`).
ACTIVE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("severity", "severity"), ("state", "state"), ("node", "node"), ("since", "since UTC"), ("message", "message"),
    ("ack", "ack"), ("as_of", "as of UTC"), ("subject", "subject"), ("rule", "rule"),
)
RESOLVED_COLUMNS: tuple[tuple[str, str], ...] = (
    ("severity", "severity"), ("node", "node"), ("since", "fired UTC"), ("resolved", "resolved UTC"),
    ("message", "message"), ("ack", "ack"), ("subject", "subject"), ("rule", "rule"),
)


#: After the state of an acknowledged alarm (``firing ✓``), or the resolved time of a resolved one
#: (``08:52:31 ✓``): which alarms someone is already on reads at every width.
ACK_MARK = "✓"
#: Cells of the acknowledger's name folded into the state cell (the resolved cell of the resolved
#: table) while the ack column is past the table's edge (``firing ✓alice``, ``08:52:31 ✓alice``);
#: a longer name is cut with an ellipsis (the panel has it whole).
ACK_NAME_CELLS = 8
#: Cells the message keeps at least, cut to leave the columns after it on screen (`fitted_cells`)
#: or beside names folded into the state cells: what comes first in it, the thing and its
#: reading (``12 V rail minimum 11.62 V``), matters more than who is on it.
MESSAGE_MIN_CELLS = 25
#: Cells the rule column keeps when it is cut to give a long message room (`fitted_cells`): its
#: first rule, and that there are more.
RULE_CUT_CELLS = 32
#: Cells the node column keeps at most when a long node name (``node01 (http://10.0.0.2:9871)``, a
#: fully qualified host name) would leave the message fewer than `MESSAGE_MIN_CELLS` (`NARROW_STEPS`):
#: cut with an ellipsis. The panel under the tables has it whole.
NODE_CUT_CELLS = 16
#: What a table whose columns cannot all be on screen gives up, in turn, until the message keeps
#: `MESSAGE_MIN_CELLS` before the edge: (node column cut to `NODE_CUT_CELLS`, since column after the message).
NARROW_STEPS: tuple[tuple[bool, bool], ...] = ((False, False), (True, False), (True, True))


def column_keys(resolved: bool, since_last: bool) -> list[str]:
    """Keys of the columns of the active (resolved) table in their order: `ACTIVE_COLUMNS`
    (`RESOLVED_COLUMNS`); with ``since_last`` the since (fired) column after the message, where
    it would otherwise leave the message a few cells (the panel has the time; the resolved cells
    then carry their date)."""
    keys = [key for key, _ in (RESOLVED_COLUMNS if resolved else ACTIVE_COLUMNS)]
    if since_last:
        keys.remove("since")
        keys.insert(keys.index("message") + 1, "since")
    return keys


@dataclass(frozen=True, slots=True)
class Arrangement:
    """One order and width of a narrow table's columns (`NARROW_STEPS`).

    Attributes:
        keys: the columns in their order (`column_keys`).
        widths: cells of each column's content, a cut node column at its cut, no names in the
            state (resolved) cells.
        named_state_cells: cells of the state column (the resolved one) with the names in.
    """

    keys: list[str]
    widths: dict[str, int]
    named_state_cells: int

    def message_room(self, width: int, padding: int, names_in_state: bool) -> int:
        """Cells of ``width`` from where the message column starts (its padding included) to the
        edge, the columns before it whole, with ``names_in_state`` the names in the state (resolved)
        cells, whose column is `fold`."""
        before = sum(self.widths[key] + 2 * padding for key in self.keys[:self.keys.index("message")])
        if names_in_state:
            before += self.named_state_cells - self.widths[self.fold]
        return width - before

    @property
    def fold(self) -> str:
        """The column whose cells name who acknowledged while the ack column is past the edge."""
        return "resolved" if "resolved" in self.widths else "state"


def utc_clock(at: float | None) -> str:
    """``11-22 08:52:02``: an alarm's own timestamp in UTC to the whole second, like the
    event list, so every node reads the same."""
    return "—" if at is None else time.strftime("%m-%d %H:%M:%S", time.gmtime(at))


def resolved_clock(fired_at: float | None, resolved_at: float | None) -> str:
    """When an alarm resolved, in UTC to the whole second: ``08:52:31`` on the UTC day it fired
    (the fired column beside it has the date), else with its date like `utc_clock`."""
    if resolved_at is not None and fired_at is not None and time.gmtime(fired_at)[:3] == time.gmtime(resolved_at)[:3]:
        return time.strftime("%H:%M:%S", time.gmtime(resolved_at))
    return utc_clock(resolved_at)


def _alarm_keys(row: AlarmRow) -> set[tuple[str, str, str]]:
    """Every alarm of ``row`` as (source, node key, alarm id)."""
    return {(row.source, row.key, alarm.id) for alarm in row.alarms}


def fitted_cells(widths: Mapping[str, int], width: int, padding: int) -> tuple[int | None, int | None]:
    """Cells of the message column and of the rule column that leave every column on screen
    (``None``: whole). The rules of a grouped row (``psu_rail_low_critical, psu_rail_undervoltage_latched,
    ...``, ~75 cells for the rail) are cut first, to `RULE_CUT_CELLS`; then the message, unless it
    would keep fewer than `MESSAGE_MIN_CELLS`: then the columns after the message are past the edge
    (at 80 columns the state cells name who acknowledged instead), and the message is cut at it
    (`AlarmTable._edge_cells`). The panel under the tables has the alarm under the cursor whole.

    Args:
        widths: cells of each column's content with every column whole, by column key.
        width: cells the table shows across.
        padding: cells of padding on each side of every cell.
    """
    room = width - sum(cells + 2 * padding for key, cells in widths.items() if key != "message") - 2 * padding
    message = widths["message"]
    if message <= room:
        return None, None
    rule = widths.get("rule", 0)
    spare = max(0, rule - RULE_CUT_CELLS)
    if message <= room + spare:
        return None, rule - (message - room)
    room += spare
    if room < MESSAGE_MIN_CELLS:
        return None, None
    return room, (rule - spare if spare else None)


@dataclass(frozen=True, slots=True)
class ColumnLayout:
    """How an alarm table fits its width.

    Attributes:
        message_cells: cells of the message column, the message cut with an ellipsis (the panel
            under the tables has it whole): to keep the columns after it on screen, or, when they
            are past the edge, to end at the edge; ``None``: as wide as the longest message.
        rule_cells: the same for the rule column (a grouped row's rules).
        names_in_state: whether the state cells (the resolved cells of the resolved table) name who
            acknowledged (the ack column past the edge).
        since_last: the since (fired) column after the message (`column_keys`), the resolved cells
            with their date (`NARROW_STEPS`).
        node_cells: cells of the node column, a long name cut with an ellipsis (`NODE_CUT_CELLS`);
            ``None``: as wide as the longest name.
    """

    message_cells: int | None = None
    rule_cells: int | None = None
    names_in_state: bool = False
    since_last: bool = False
    node_cells: int | None = None


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
        self._widths: dict[str, int] = {}
        """Cells of each column's content without names in the state (resolved) cells."""
        self._dated_widths: dict[str, int] = {}
        """The same with the resolved cells dated (the since column after the message)."""
        self._named_state_width = 0
        """Cells of the state column (the resolved column of the resolved table) with the names in."""
        self._dated_named_state_width = 0
        """The same with the resolved cells dated."""
        self._layout = ColumnLayout()
        """How the table is drawn to fit its width now."""

    def on_mount(self) -> None:
        self._add_columns()

    def _column_keys(self) -> list[str]:
        return column_keys(self.resolved, self._layout.since_last)

    def _add_columns(self) -> None:
        # Alarms may arrive before the mount handler ran; the columns must exist first.
        if not self.columns:
            titles = dict(RESOLVED_COLUMNS if self.resolved else ACTIVE_COLUMNS)
            layout = self._layout
            for key in self._column_keys():
                # A cut message, rule or node column gets its width; every other is as wide as its content.
                width = {"message": layout.message_cells, "rule": layout.rule_cells, "node": layout.node_cells}.get(key)
                self.add_column(titles[key], key=key, width=width)

    def _style(self, name: str) -> str:
        return str(self.get_component_rich_style(f"alarm-table--{name}", partial=True))

    @property
    def _fold_column(self) -> str:
        """The column whose cells name who acknowledged while the ack column is past the edge."""
        return "resolved" if self.resolved else "state"

    def _folded(self, row: AlarmRow, *, name: bool, dated: bool = False) -> Text:
        """The cell of `_fold_column` for ``row``, with who acknowledged in it with ``name`` (a
        resolved cell with its date with ``dated``)."""
        if self.resolved:
            return self._resolved(row, name=name, dated=dated)
        return self._state(row, name=name)

    def _state(self, row: AlarmRow, *, name: bool) -> Text:
        """``firing``, ``pending ✓`` once acknowledged, ``firing ✓alice`` with ``name`` (who, cut short)."""
        a = row.alarm
        return self._acked(Text(a.state, style=self._style(a.severity if a.state == "firing" else "pending")),
                           row, name=name)

    def _resolved(self, row: AlarmRow, *, name: bool, dated: bool = False) -> Text:
        """``08:52:31`` (`resolved_clock`), ``08:52:31 ✓`` once acknowledged, ``08:52:31 ✓carol`` with ``name``;
        with ``dated`` (the fired column not beside it) always with its date, ``11-22 08:52:31``."""
        a = row.alarm
        clock = utc_clock(a.resolved_at) if dated else resolved_clock(a.fired_at or a.started_at, a.resolved_at)
        return self._acked(Text(clock), row, name=name)

    def _acked(self, text: Text, row: AlarmRow, *, name: bool) -> Text:
        """``text`` with the ack mark once the alarm is acknowledged, and who (cut short) with ``name``."""
        a = row.alarm
        if a.acknowledged_at is not None or a.acknowledged_by:
            acked = self._style("acked")
            text.append(" " + ACK_MARK, style=acked)
            if name and a.acknowledged_by:
                by = plain(a.acknowledged_by, acked)
                by.truncate(ACK_NAME_CELLS, overflow="ellipsis")
                text.append_text(by)
        return text

    def _cells(self, row: AlarmRow, *, names_in_state: bool = False, dated: bool = False) -> dict[str, Text]:
        a = row.alarm
        rule = plain(", ".join(x.rule for x in row.alarms))
        if row.source == "cluster":
            rule.append(" (cluster)", style=self._style("cluster"))
        cells = {
            "severity": Text(a.severity, style=self._style(a.severity)),
            "state": self._state(row, name=names_in_state and not self.resolved),
            "node": plain(row.node),
            "rule": rule,
            "subject": plain(a.subject),
            "since": Text(utc_clock(a.fired_at or a.started_at)),
            "resolved": self._resolved(row, name=names_in_state and self.resolved, dated=dated),
            "ack": plain(a.acknowledged_by or ("yes" if a.acknowledged_at else ""), self._style("acked")),
            "message": plain(row.message),
            "as_of": Text(""),
        }
        # Cut to its column's width (`ColumnLayout`), each ends in "…".
        for key in ("message", "rule", "node"):
            cells[key].overflow = "ellipsis"
        if row.as_of is not None:
            # A dead node's alarm is what it last said: faint, and dated (as stale figures are drawn).
            cells["as_of"] = Text(utc_clock(row.as_of))
            old = self._style("old")
            for text in cells.values():
                text.stylize(old)
        return cells

    def watch_alarms(self, alarms: tuple[AlarmRow, ...]) -> None:
        self._add_columns()
        self._measure(alarms)
        layout = self._fit()
        keys = [row.row_key for row in alarms]
        current = [str(r.key.value) for r in self.ordered_rows]
        if keys == current and layout == self._layout:
            for row in alarms:
                if self._rows_by_key.get(row.row_key) != row:
                    cells = self._cells(row, names_in_state=layout.names_in_state, dated=layout.since_last)
                    for column in self._column_keys():
                        self.update_cell(row.row_key, column, cells[column], update_width=True)
            self._rows_by_key = {row.row_key: row for row in alarms}
        elif keys == current:
            self._draw(alarms, layout, self._cursor_key())
        else:
            # The cursor follows the alarm the operator moved it to in the table they are in (`x`
            # must not land on another incident). Left on the first row, or in the other table, it
            # starts again from the top, the worst or newest rows, rather than follow a row nobody
            # chose and scroll the alarms that came since out of view.
            follow = self.has_focus and 0 < self.cursor_row < len(current)
            self._draw(alarms, layout, self._cursor_key() if follow else None)

    def on_resize(self) -> None:
        layout = self._fit()
        if layout != self._layout:
            self._draw(self.alarms, layout, self._cursor_key())

    def _cursor_key(self) -> str | None:
        """The row key under the cursor, if any."""
        if not 0 <= self.cursor_row < self.row_count:
            return None
        return str(self.ordered_rows[self.cursor_row].key.value)

    def _draw(self, alarms: tuple[AlarmRow, ...], layout: ColumnLayout, cursor_key: str | None) -> None:
        """Draw ``alarms`` anew with ``layout``, the cursor on the row of ``cursor_key`` (or of an alarm of its row).

        The columns are made anew too: Textual's column as wide as its content keeps the width of
        the widest content it ever held, and a long message gone would leave the ack column past
        the edge.
        """
        self._layout = layout
        self.clear(columns=True)
        self._add_columns()
        for row in alarms:
            cells = self._cells(row, names_in_state=layout.names_in_state, dated=layout.since_last)
            self.add_row(*(cells[c] for c in self._column_keys()), key=row.row_key)
        keys = [row.row_key for row in alarms]
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

    def _measure(self, alarms: tuple[AlarmRow, ...]) -> None:
        """Take the widths of ``alarms``' cells (`natural_width` and what `_fit` weighs)."""
        self._widths = self._column_widths(alarms)
        self._named_state_width = max([self._widths.get(self._fold_column, 0),
                                       *(self._folded(row, name=True).cell_len for row in alarms)])
        self._dated_widths = self._column_widths(alarms, dated=True)
        self._dated_named_state_width = max([self._dated_widths.get(self._fold_column, 0),
                                             *(self._folded(row, name=True, dated=True).cell_len for row in alarms)])
        self.natural_width = sum(self._widths.values()) + 2 * self.cell_padding * len(self._widths)

    def _fit(self) -> ColumnLayout:
        """The layout for the table's width now: every column whole when they fit; else the rules and
        the message cut to leave every column on screen (`fitted_cells`); where they cannot be, the
        first of `NARROW_STEPS` that leaves the message `MESSAGE_MIN_CELLS` (`_arrangement`), the
        message cut at the table's edge (`_edge_cells`) and, while the ack column is past the edge,
        the names in the state (resolved) cells (`_names_wanted`)."""
        width = self.scrollable_content_region.width
        if not self._widths or self.natural_width <= width:
            return ColumnLayout()
        message, rule = fitted_cells(self._widths, width, self.cell_padding)
        if message is not None or rule is not None:
            return ColumnLayout(message, rule)
        for node_cut, since_last in NARROW_STEPS:
            arranged = self._arrangement(node_cut, since_last)
            room = arranged.message_room(width, self.cell_padding, names_in_state=False)
            if room >= min(MESSAGE_MIN_CELLS, arranged.widths["message"] + 2 * self.cell_padding):
                break
        names = self._names_wanted(arranged)
        node = arranged.widths["node"]
        return ColumnLayout(self._edge_cells(arranged, names), None, names, since_last=since_last,
                            node_cells=node if node < self._widths["node"] else None)

    def _arrangement(self, node_cut: bool, since_last: bool) -> Arrangement:
        """The columns' order and widths with the node column cut to `NODE_CUT_CELLS` (``node_cut``)
        and the since column after the message (``since_last``)."""
        widths = dict(self._dated_widths if since_last else self._widths)
        if node_cut:
            widths["node"] = min(widths["node"], NODE_CUT_CELLS)
        named = self._dated_named_state_width if since_last else self._named_state_width
        return Arrangement(column_keys(self.resolved, since_last), widths, named)

    def _edge_cells(self, arranged: Arrangement, names_in_state: bool) -> int | None:
        """Cells of the message column that end it at the table's right edge, when the columns after
        it are past that edge and the whole message would run past it too (``None``: it ends on screen).

        The edge would otherwise cut the message anywhere, inside a figure (``11.6`` of ``11.608 V``)
        with nothing to say so; cut to its column it ends in "…" (the panel has it whole)."""
        room = arranged.message_room(self.scrollable_content_region.width, self.cell_padding,
                                     names_in_state) - 2 * self.cell_padding
        return max(1, room) if arranged.widths["message"] > room else None

    def _column_widths(self, alarms: tuple[AlarmRow, ...], dated: bool = False) -> dict[str, int]:
        """Cells of each column's content with every column whole (no name in the state or resolved cells;
        with ``dated``, the resolved cells with their date)."""
        titles = RESOLVED_COLUMNS if self.resolved else ACTIVE_COLUMNS
        widths = {key: cell_len(title) for key, title in titles}
        for row in alarms:
            for key, cell in self._cells(row, dated=dated).items():
                if key in widths:
                    widths[key] = max(widths[key], cell.cell_len)
        return widths

    def _names_wanted(self, arranged: Arrangement) -> bool:
        """Whether who acknowledged goes into the state cells (`_fold_column`): the ack column ends past the
        table's right edge, and the message still gets `MESSAGE_MIN_CELLS` with the names in.
        Measured from the widths without names, so folding them in cannot flip the choice."""
        widths = arranged.widths
        if "ack" not in widths:
            return False
        width = self.scrollable_content_region.width
        ends = list(accumulate(widths[key] + 2 * self.cell_padding for key in arranged.keys))
        past = ends[arranged.keys.index("ack")] > width
        return past and arranged.message_room(width, self.cell_padding, names_in_state=True) >= MESSAGE_MIN_CELLS

    def selected(self) -> AlarmRow | None:
        """The alarm under the cursor, if any."""
        if not self.row_count or not 0 <= self.cursor_row < self.row_count:
            return None
        key = self.ordered_rows[self.cursor_row].key.value
        return self._rows_by_key.get(str(key))
