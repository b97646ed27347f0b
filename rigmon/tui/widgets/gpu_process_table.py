"""GpuProcessTable: the processes holding each GPU (pid, user, GPU memory, utilisation, command), as nvitop lists them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.cells import cell_len
from rich.console import RenderableType
from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import DataTable

from rigmon.schema import CollectorStatus, GpuProcessReading
from rigmon.tui import format as fmt
from rigmon.tui.text import plain

#: Columns: key and title.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("gpu", "GPU"),
    ("pid", "PID"),
    ("user", "user"),
    ("mem", "GPU mem"),
    ("util", "SM"),
    ("running", "running"),
    ("command", "command"),
)
#: Left out when the table does not fit its box even with the short command (an 80-column terminal).
OPTIONAL = frozenset({"running"})
#: Columns that wrap, narrowest last, when the table does not fit its box even without the `OPTIONAL`
#: ones (a long short command such as ``python3 -m vllm.entrypoints.openai.api_server``, a long user
#: name): the command, then the user, each to at least this many cells. Rows then grow a line rather than
#: run past the box's edge, where an 80-column terminal cut them off.
WRAPPING: tuple[tuple[str, int], ...] = (("command", 16), ("user", 8))
#: What the command cell says of a PID the agent's /proc does not show (an agent that does not say in which
#: PID namespace it runs: an older one).
NOT_VISIBLE = "(not in the agent's /proc)"
#: The same from an agent in the host's PID namespace (``agent_other_pid_ns`` false), which every PID is in:
#: its /proc hides the process (mounted with ``hidepid``, an agent not allowed to see other users'), or it
#: has just exited. Not "another PID namespace", which would send the operator to ``--pid=host`` for nothing.
NOT_VISIBLE_HOST = "(not in the agent's /proc: hidden by hidepid, or exited)"
#: The words ``agent in another PID namespace`` in the ``gpu_processes`` collector's status (its
#: ``status_note``: the agent's /proc is not the host's PID namespace, whose PIDs NVML gives, so it
#: looks none of them up): how agents older than the readings' ``agent_other_pid_ns`` say it, read
#: only from those. The dashboard does not import the collectors: these are the words it reads.
OTHER_NAMESPACE_STATUS = "agent in another PID namespace"
#: Said once for the table instead of `NOT_VISIBLE` in every NVIDIA process's row.
OTHER_NAMESPACE_NOTE = "the agent runs in another PID namespace: commands not visible; run it with --pid=host"


def process_key(proc: GpuProcessReading) -> str:
    """Row key of a process on a GPU."""
    where = proc.gpu_index if proc.vendor == "nvidia" else proc.pci_bus_id
    return f"{proc.vendor}:{where}:{proc.pid}"


def agent_in_other_namespace(status: CollectorStatus | None, procs: Sequence[GpuProcessReading]) -> bool:
    """Whether the agent runs in another PID namespace than the host's, as its NVIDIA processes'
    readings say (``agent_other_pid_ns``); where none says (an agent older than that field), as the
    ``gpu_processes`` collector's status says it in words (`OTHER_NAMESPACE_STATUS`). False for an
    agent that says neither (older still)."""
    said = [p.agent_other_pid_ns for p in procs if p.vendor == "nvidia" and p.agent_other_pid_ns is not None]
    if said:
        return any(said)
    return status is not None and status.error is not None and OTHER_NAMESPACE_STATUS in status.error


def namespace_note(status: CollectorStatus | None, procs: Sequence[GpuProcessReading]) -> str | None:
    """`OTHER_NAMESPACE_NOTE` when the agent runs in another PID namespace and an NVIDIA process is
    listed (its command is not known), else ``None``: what the table's heading says once."""
    shown = any(p.vendor == "nvidia" and not p.in_namespace for p in procs)
    return OTHER_NAMESPACE_NOTE if shown and agent_in_other_namespace(status, procs) else None


def process_order(procs: Sequence[GpuProcessReading]) -> list[GpuProcessReading]:
    """NVIDIA GPUs by index, then AMD GPUs by address; on one GPU the largest memory first."""
    return sorted(procs, key=lambda p: (p.vendor != "nvidia", p.gpu_index if p.gpu_index is not None else -1,
                                        p.pci_bus_id or "", -(p.gpu_mem_bytes or 0), p.pid))


class GpuProcessTable(DataTable[RenderableType]):
    """One row per process on a GPU, grouped by GPU (the GPU shown on its first row only):
    pid, user, GPU memory, SM utilisation, how long it has run, and its command line
    (the short one on a narrow screen, the full one on a wide one)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = DataTable.COMPONENT_CLASSES | {
        "gpu-process-table--muted",
        "gpu-process-table--lost",
    }
    DEFAULT_CSS = """
    GpuProcessTable {
        height: auto;
    }
    """

    processes: reactive[tuple[GpuProcessReading, ...]] = reactive(tuple)
    """Processes of the node's latest frame."""
    now_at: reactive[float | None] = reactive(None)
    """The frame's time (Unix seconds): how long a process has run is counted to it."""
    amd_cards: reactive[dict[str, str]] = reactive(dict)
    """AMD card name by PCI address, for the GPU column."""
    lost_gpus: reactive[frozenset[int]] = reactive(frozenset)
    """Indexes of lost NVIDIA GPUs: their processes are drawn in the lost style."""
    other_namespace: reactive[bool] = reactive(False)
    """Whether the agent runs in another PID namespace than the host's (`agent_in_other_namespace`):
    no NVIDIA process's command is known, which the heading says once (`namespace_note`), so their
    command cells are blank rather than each saying `NOT_VISIBLE`."""
    available: reactive[int] = reactive(0)
    """Cells the table may take: the full command line shows when it fits, else the short one
    (``python3 train.py``), and the `OPTIONAL` columns go when even that does not fit. 0: all, full."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="none", zebra_stripes=False, show_cursor=False)
        self.can_focus = False
        self._update_pending = False
        self._order: list[str] = []
        self._shown: list[str] = []
        #: Fixed widths of the wrapping columns (`WRAPPING`) in force; empty: every column fits its content.
        self._widths: dict[str, int] = {}
        #: Whether `cells` draws full command lines (set per update by the fit).
        self._full = True
        #: Whether the rows in the table hold full command lines.
        self._drawn_full = True

    def on_mount(self) -> None:
        self._schedule()

    def watch_available(self) -> None:
        self._schedule()

    def watch_processes(self) -> None:
        self._schedule()

    def watch_now_at(self) -> None:
        self._schedule()

    def watch_lost_gpus(self) -> None:
        self._schedule()

    def watch_amd_cards(self) -> None:
        self._schedule()

    def watch_other_namespace(self) -> None:
        self._schedule()

    def _schedule(self) -> None:
        if not self._update_pending and self.is_mounted:
            self._update_pending = True
            self.call_after_refresh(self.update_rows)

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"gpu-process-table--{name}", partial=True)

    def gpu_label(self, proc: GpuProcessReading) -> str:
        """The GPU column: NVML index, or the AMD card."""
        if proc.vendor == "nvidia":
            return fmt.MISSING if proc.gpu_index is None else str(proc.gpu_index)
        return self.amd_cards.get(proc.pci_bus_id or "", proc.pci_bus_id or fmt.MISSING)

    def cells(self, proc: GpuProcessReading, first_on_gpu: bool) -> dict[str, RenderableType]:
        """The row of one process, by column key."""
        lost = proc.vendor == "nvidia" and proc.gpu_index in self.lost_gpus
        style: Style | str = self._style("lost") if lost else ""
        muted = self._style("muted")
        running = None
        if self.now_at is not None and proc.started_at is not None:
            running = max(0.0, self.now_at - proc.started_at)
        if not proc.in_namespace:
            # An agent in another PID namespace looks up no NVIDIA PID: not this process's doing.
            said = self.other_namespace and proc.vendor == "nvidia"
            hidden = NOT_VISIBLE_HOST if proc.agent_other_pid_ns is False else NOT_VISIBLE
            command = Text(fmt.MISSING if said else hidden, style=muted)
        else:
            command = plain((proc.cmdline or proc.command) if self._full else proc.command, style)
        return {
            "gpu": Text(self.gpu_label(proc) if first_on_gpu else "", style=style),
            "pid": Text(str(proc.pid), style=style),
            "user": plain(proc.user, style),
            "mem": Text(fmt.size(proc.gpu_mem_bytes), style=style, justify="right"),
            "util": Text(fmt.pct(proc.util_pct), style=style, justify="right"),
            "running": Text(fmt.age(running), justify="right"),
            "command": command,
        }

    def update_rows(self) -> None:
        """Bring the rows in line with the processes: in place while the same processes run,
        rebuilt (to keep them grouped by GPU) when one comes or goes."""
        self._update_pending = False
        ordered = process_order(self.processes)
        keys = [process_key(p) for p in ordered]
        rows = self._rows(ordered, full=True)
        shown = [key for key, _ in COLUMNS]
        full = True
        widths: dict[str, int] = {}
        if self.available > 0 and _width(rows, shown) > self.available:
            full = False
            rows = self._rows(ordered, full=False)
            if _width(rows, shown) > self.available:
                shown = [key for key in shown if key not in OPTIONAL]
                widths = _wrapped_widths(rows, shown, self.available)
        if shown != self._shown or widths != self._widths:
            self.clear(columns=True)
            for key, title in COLUMNS:
                if key in shown:
                    self.add_column(title, key=key, width=widths.get(key))
            self._shown = shown
            self._widths = widths
            self._order = []
        if keys != self._order or full != self._drawn_full or widths:
            # Wrapped rows are added again: a row's height follows its cells only when it is added.
            self._drawn_full = full
            self.clear()
            for key, row in zip(keys, rows):
                self.add_row(*(row[c] for c in shown), key=key, height=None if widths else 1)
            self._order = keys
            return
        for key, row in zip(keys, rows):
            for column in shown:
                self.update_cell(key, column, row[column], update_width=True)

    def _rows(self, ordered: Sequence[GpuProcessReading], full: bool) -> list[dict[str, RenderableType]]:
        self._full = full
        rows: list[dict[str, RenderableType]] = []
        previous_gpu: str | None = None
        for proc in ordered:
            gpu = f"{proc.vendor}:{proc.gpu_index}:{proc.pci_bus_id}"
            rows.append(self.cells(proc, gpu != previous_gpu))
            previous_gpu = gpu
        return rows


def _width(rows: Sequence[dict[str, RenderableType]], columns: Sequence[str]) -> int:
    """Cells the table takes uncut: each column's widest cell or title, one cell of padding either side."""
    return sum(_column_width(rows, key) + 2 for key in columns)


def _column_width(rows: Sequence[dict[str, RenderableType]], key: str) -> int:
    """The widest cell of column ``key``, or its title."""
    cells = [row[key] for row in rows]
    return max([cell_len(dict(COLUMNS)[key]), *(cell_len(c.plain) if isinstance(c, Text) else cell_len(str(c))
                                                for c in cells)])


def _wrapped_widths(rows: Sequence[dict[str, RenderableType]], columns: Sequence[str], available: int) -> dict[str, int]:
    """Widths of the `WRAPPING` columns that bring the table within ``available`` cells: the command's
    narrowed first, to at least its minimum, then the user's."""
    widths = {key: _column_width(rows, key) for key in columns}
    excess = sum(width + 2 for width in widths.values()) - available
    fixed: dict[str, int] = {}
    for key, least in WRAPPING:
        if excess <= 0 or key not in widths:
            continue
        narrower = max(least, widths[key] - excess)
        excess -= widths[key] - narrower
        fixed[key] = narrower
    return fixed
