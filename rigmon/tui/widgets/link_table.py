"""LinkTable: the link matrix as a table, one block of rows per path name, a column per peer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual.coordinate import Coordinate
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable

from rigmon.cluster.incident import rtt
from rigmon.cluster.link_matrix import LinkMatrix, MatrixRow
from rigmon.cluster.node_view import OUT_OF_TOUCH
from rigmon.summary import PathCell, loss_figure
from rigmon.tui import format as fmt
from rigmon.tui.recording_end import ended_clock
from rigmon.tui.text import plain

#: What a cell holds, richest first; the table takes the richest that fits its width.
Detail = Literal["loss", "p99"]
DETAILS: tuple[Detail, ...] = ("loss", "p99")
#: Cells of a cell's figures: the p99 round trip (``850 µs``, ``silent``, ``badkey``) with the
#: degraded or flooded mark, and the loss (``100%``; a silent path: how long it has been silent, ``4s``).
P99_WIDTH = 7
LOSS_WIDTH = 4
#: Marks the cells' states, so the matrix reads without colour too.
DEGRADED_MARK = "▲"
#: The peer said its probe port is flooded: the cell's loss is suspect.
FLOODED_MARK = "?"
#: A silent path whose node refuses the peer's probes for a bad MAC: the keys differ.
KEY_MISMATCH = "badkey"
#: Index of the first peer's column (after path, node and link).
FIRST_PEER_COLUMN = 3
SELF = "·"
#: After a node's name, in a replay, when its recording ended before the cursor (the legend says what it means).
ENDED_MARK = "ended"


def cell_width(detail: Detail) -> int:
    """Cells one peer's column takes at ``detail``, without its padding."""
    return P99_WIDTH + 1 + LOSS_WIDTH if detail == "loss" else P99_WIDTH


def link_speed(speeds: tuple[float, float] | None) -> str:
    """A row's link: ``100G``, ``2.5G``; ``10-40G`` over interfaces of different speeds; ``—`` unknown."""
    if speeds is None:
        return fmt.MISSING
    low, high = speeds
    return f"{low:g}G" if low == high else f"{low:g}-{high:g}G"


def silent_for(age_s: float) -> str:
    """How long a path has been silent, in at most `LOSS_WIDTH` cells: ``4s``, ``12m``, ``3h``, ``9d``."""
    for unit_s, unit in ((1.0, "s"), (60.0, "m"), (3600.0, "h")):
        if round(age_s / unit_s) < 100:
            return f"{age_s / unit_s:.0f}{unit}"
    return f"{min(999.0, age_s / 86400.0):.0f}d"


def cell_text(cell: PathCell, detail: Detail) -> str:
    """One peer's figures at ``detail``: `` 1.2 ms▲   3%``, `` silent    4s``, `` silent  100%``.

    A silent path's second figure is how long it has been silent (since its last reply), which is
    what the legend promises and what ``silent`` means (the newest probes all lost); a loss would
    read as a contradiction while the window still holds earlier replies (``silent 20%``), and say
    nothing new once it does not (``100%``). ``100%`` only for a path that never answered (no last
    reply to count from). ``badkey`` stands for ``silent`` when the
    path's node refuses the peer's probes for a bad MAC; `FLOODED_MARK` marks a loss the flooded
    peer's port may have caused.
    """
    if cell.state == "silent":
        p99 = KEY_MISMATCH if cell.key_mismatch else "silent"
    elif cell.rtt_p99_us is None:
        p99 = fmt.MISSING
    else:
        p99 = rtt(cell.rtt_p99_us)
    mark = FLOODED_MARK if cell.peer_flooded else DEGRADED_MARK if cell.state == "degraded" else " "
    p99 = p99.rjust(P99_WIDTH - 1) + mark
    if detail == "p99":
        return p99
    if cell.state == "silent" and cell.last_reply_age_s is not None:
        loss = silent_for(cell.last_reply_age_s)
    else:
        # On the same side of the path's loss limit as the loss (2.4 % over a 2 % limit is not "2%").
        loss = fmt.MISSING if cell.loss_pct is None else loss_figure(cell.loss_pct, cell.loss_limit_pct, LOSS_WIDTH)
    return f"{p99} {loss:>{LOSS_WIDTH}}"


def fit_layout(matrix: LinkMatrix, width: int, ended: Mapping[str, float] | None = None,
               ended_peers: Mapping[str, float] | None = None) -> tuple[Detail, bool]:
    """The richest detail at which ``matrix`` fits ``width`` cells (the least when none does), and whether
    the titles of the peers whose recording ended say when at it (`peer_label`): the figures come first.
    ``ended`` and ``ended_peers`` as `LinkTable.ended` and `LinkTable.ended_peers`."""
    ended, ended_peers = ended or {}, ended_peers or {}
    path_w = max([cell_len("path"), *(cell_len(p) for p in matrix.paths)])
    node_w = max([cell_len("node"), *(cell_len(node_label(r, ended.get(r.key))) for r in matrix.rows)])
    link_w = max([cell_len("link"), *(cell_len(link_speed(r.link_gbps)) for r in matrix.rows)])
    peer_w = max([0, *(cell_len(p) for p in matrix.peers)])
    for detail in DETAILS:
        for timed in (True, False) if ended_peers else (False,):
            # One cell of padding either side of each column, a scrollbar's cell.
            peers_w = sum(max(cell_width(detail), peer_w, cell_len(peer_label(p, ended_peers.get(p), timed))) + 2
                          for p in matrix.peers)
            if path_w + node_w + link_w + 6 + peers_w + 1 <= width:
                return detail, timed
    return DETAILS[-1], False


def fit_detail(matrix: LinkMatrix, width: int, ended: Mapping[str, float] | None = None,
               ended_peers: Mapping[str, float] | None = None) -> Detail:
    """The richest detail at which ``matrix`` fits ``width`` cells (`fit_layout`)."""
    return fit_layout(matrix, width, ended, ended_peers)[0]


def node_label(row: MatrixRow, ended_at: float | None = None) -> str:
    """The probing node, with its state when it is not live (its figures are its last ones), or in a
    replay ``ended 00:01:30`` when its recording ended at ``ended_at``, before the cursor (short: the
    whole "recording ended" would cost the loss figures at 80 columns; the legend says it)."""
    if row.state != "live":
        return f"{row.node} {row.state}"
    return row.node if ended_at is None else f"{row.node} {ENDED_MARK} {ended_clock(ended_at)}"


def peer_label(peer: str, ended_at: float | None = None, timed: bool = True) -> str:
    """A peer's column title: its name, or in a replay ``node03 ended 00:01:30`` when its recording ended
    at ``ended_at``, before the cursor, as its row says; ``node03 ended`` where the time would cost the
    loss figures (``timed`` false: its row, when it probes, gives the time)."""
    if ended_at is None:
        return peer
    return f"{peer} {ENDED_MARK} {ended_clock(ended_at)}" if timed else f"{peer} {ENDED_MARK}"


def row_key(row: MatrixRow) -> str:
    """A row's key in the table."""
    return f"{row.path}\n{row.key}"


class LinkTable(DataTable[Text]):
    """Rows: the probing node on each path (the path named on its first row) and the speed of
    its interface on the path; columns: peers.

    A cell is the node's latest p99 round trip to the peer (``silent`` when nothing answered),
    with its loss where the width allows, coloured by the agent's judgement of the
    path against its thresholds. A node that is not live, or whose recording ended in a replay, has
    its state after its name and its cells muted. Enter on a cell posts `LinkTable.NodeChosen` for
    the row's node.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = DataTable.COMPONENT_CLASSES | {
        "link-table--ok",
        "link-table--warn",
        "link-table--bad",
        "link-table--unknown",
        "link-table--stale",
        "link-table--path",
    }
    DEFAULT_CSS = """
    LinkTable {
        height: auto;
        max-height: 100%;
    }
    """

    matrix: reactive[LinkMatrix] = reactive(LinkMatrix, always_update=True)
    """The matrix to draw (`rigmon.cluster.link_matrix.link_matrix`)."""
    ended: reactive[Mapping[str, float]] = reactive(dict, always_update=True)
    """In a replay, the nodes whose recording ended before the cursor, by key, with their last frame's
    time (`rigmon.cluster.recording_end.recording_ends`): their rows read as old, though they are live.
    Set it (`set_reactive`) before ``matrix``, which draws both."""
    ended_peers: reactive[Mapping[str, float]] = reactive(dict, always_update=True)
    """The same nodes by name, for the peers' columns (a peer may probe nothing, so have no row): their
    titles say it ended. Set it (`set_reactive`) before ``matrix``, which draws it."""

    @dataclass
    class NodeChosen(Message):
        """The operator chose the row's node (Enter or a click on a cell)."""

        key: str

    @dataclass
    class DetailChanged(Message):
        """The cells now hold ``detail`` (the width changed): the legend says what they hold."""

        detail: Detail

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="cell", zebra_stripes=False)
        # Many peers scroll sideways under the path, node and link columns, which stay.
        self.fixed_columns = FIRST_PEER_COLUMN
        self._layout: tuple[object, ...] | None = None
        self._rows_by_key: dict[str, MatrixRow] = {}
        self.detail: Detail = DETAILS[0]
        """What the cells hold as last laid out (`fit_layout`)."""

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"link-table--{name}", partial=True)

    def _old(self, row: MatrixRow) -> bool:
        """Whether ``row``'s figures are its node's last ones, not current."""
        return row.state != "live" or row.key in self.ended

    def _label(self, row: MatrixRow) -> str:
        return node_label(row, self.ended.get(row.key))

    def _peer_style(self, peer: str) -> Style:
        """A peer's column title: bad while the dashboard cannot hear it, muted as an old row once its
        recording ended (in a replay)."""
        if self.matrix.peer_states.get(peer) in OUT_OF_TOUCH:
            return self._style("bad")
        return self._style("stale") if peer in self.ended_peers else Style()

    def _cell_style(self, cell: PathCell, row: MatrixRow) -> Style:
        if self._old(row):
            return self._style("stale")
        return self._style({"ok": "ok", "degraded": "warn", "silent": "bad"}.get(cell.state, "unknown"))

    def watch_matrix(self, matrix: LinkMatrix) -> None:
        self.redraw()

    def on_resize(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        """Lay the table out again when its rows, columns or detail changed; else update its cells."""
        if not self.is_mounted:
            return
        matrix = self.matrix
        detail, timed = fit_layout(matrix, self.size.width or 80, self.ended, self.ended_peers)
        if detail != self.detail:
            self.detail = detail
            self.post_message(self.DetailChanged(detail))
        titles = tuple(peer_label(p, self.ended_peers.get(p), timed) for p in matrix.peers)
        layout = (matrix.shape, detail, tuple(sorted(matrix.peer_states.items())),
                  tuple(self._label(r) for r in matrix.rows), titles)
        rows = [(row_key(r), self._cells(matrix, r, index, detail)) for index, r in enumerate(matrix.rows)]
        self._rows_by_key = {row_key(r): r for r in matrix.rows}
        if layout != self._layout:
            cursor = self.cursor_coordinate
            self.clear(columns=True)
            self.add_column(Text("path", style=self._style("path")), key="path")
            self.add_column("node", key="node")
            self.add_column(Text("link", justify="right"), key="link")
            width = cell_width(detail)
            for peer, title in zip(matrix.peers, titles):
                self.add_column(plain(title, self._peer_style(peer), justify="right"), key=f"peer:{peer}",
                                width=max(width, cell_len(title)))
            for key, cells in rows:
                self.add_row(*cells, key=key)
            self._layout = layout
            if self.row_count:
                # The cursor starts on the first peer's cell (the path, node and link columns
                # are labels), and stays where it was when the table is laid out again.
                column = cursor.column if cursor.column >= FIRST_PEER_COLUMN else FIRST_PEER_COLUMN
                self.cursor_coordinate = Coordinate(min(cursor.row, self.row_count - 1),
                                                    min(column, len(self.columns) - 1))
            return
        for key, cells in rows:
            for column_key, value in zip(self.columns, cells):
                self.update_cell(key, column_key, value)

    def _cells(self, matrix: LinkMatrix, row: MatrixRow, index: int, detail: Detail) -> list[Text]:
        first = index == 0 or matrix.rows[index - 1].path != row.path
        out = [plain(row.path if first else "", self._style("path")),
               plain(self._label(row), self._style("stale") if self._old(row) else ""),
               Text(link_speed(row.link_gbps), style=self._style("unknown"), justify="right")]
        for peer, cell in zip(matrix.peers, row.cells):
            if cell is None:
                out.append(Text(SELF if peer == row.node else "", style=self._style("unknown"), justify="right"))
            else:
                out.append(Text(cell_text(cell, detail), style=self._cell_style(cell, row), justify="right"))
        return out

    def on_data_table_cell_selected(self, event: DataTable.CellSelected) -> None:
        event.stop()
        row = self._rows_by_key.get(str(event.cell_key.row_key.value))
        if row is not None:
            self.post_message(self.NodeChosen(row.key))
