"""The cluster table's columns: their layout in a width, and each column's figure, level and trend."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len, set_cell_size
from rich.table import Table

from rigmon.cluster.incident import rtt
from rigmon.cluster.node_view import OUT_OF_TOUCH, NodeView
from rigmon.summary import (
    RAIL_CRITICAL_VOLTS,
    RAIL_WARN_VOLTS,
    WORST_WINDOW_S,
    NodeSummary,
    PathCell,
    power_level,
)
from rigmon.tui import format as fmt
from rigmon.tui import gauge


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
#: The worst peer path's column, shown when any node probes peers (after ``links``). Its figure is
#: the worst path of the last `WORST_WINDOW_S`: the title says so, as the rail's does.
PATH_COLUMN = Column("path", f"path {WORST_WINDOW_S:.0f}s", 8, 1)
#: Columns when a node probes peers and the screen is wide enough for all of them.
COLUMNS_WITH_PATH: tuple[Column, ...] = (*COLUMNS[:6], PATH_COLUMN, *COLUMNS[6:])
#: Columns with peer paths at 80 columns: the CPU column gives way to the path (for tensor
#: parallelism the round trip between nodes says more than CPU busy), the name is narrower (16 cells
#: at 80 columns, the spare ones; at least 14, so that the layout fits 79).
COLUMNS_WITH_PATH_NARROW: tuple[Column, ...] = (
    Column("node", "node", 14, 2), *COLUMNS[1:6], PATH_COLUMN, COLUMNS[6], COLUMNS[8])


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


def figure_level(column: str, summary: NodeSummary | None, arrays_unknown: int = 0) -> str | None:
    """``bad`` or ``warn`` when a column's figure shows trouble: a rail minimum of the last
    60 s below the alarm thresholds, a GPU missing, a link down (amber: only slow), an md array degraded, a link
    unhealthy within the last 60 s though healthy now (it flaps), GPU peaks of the last 60 s far over the
    power limit, a peer path silent (red while it still is) or degraded within the last 60 s.

    ``missing`` (greyed, as a figure not known) for the storage figure of a node with none of its md arrays
    degraded but ``arrays_unknown`` of them not known now (/proc/mdstat unreadable): neither healthy nor
    degraded, and not its last health."""
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
    if column == "storage" and arrays_unknown:
        return "missing"
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
