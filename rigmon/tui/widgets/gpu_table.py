"""GpuTable: one row per GPU (NVIDIA keyed by UUID, AMD by card), updated in place."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import DataTable

from rigmon.cluster.summary import gpu_key
from rigmon.schema import AmdGpuReading, GpuReading
from rigmon.tui import format as fmt
from rigmon.tui import gauge, row_lines
from rigmon.tui.text import plain

#: Columns: key and title.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("gpu", "GPU"),
    ("name", "name"),
    ("state", "state"),
    ("power", "W"),
    ("peak", "peak"),
    ("limit", "limit"),
    ("trend", "peak W trend"),
    ("sm", "SM MHz"),
    ("mem", "mem MHz"),
    ("temp", "temp"),
    ("util", "util"),
    ("pcie", "PCIe/max"),
)
#: Cells of the power trend column.
TREND_WIDTH = 12
#: Columns left out on a narrow screen (an 80-column terminal).
OPTIONAL = frozenset({"name", "trend", "mem"})


def short_name(name: str | None) -> str:
    """A GPU's marketing name without the brand words: ``V100-SXM2-16GB``."""
    if name is None:
        return fmt.MISSING
    for prefix in ("NVIDIA ", "Tesla "):
        name = name.removeprefix(prefix)
    return name


class GpuTable(DataTable[RenderableType]):
    """Watts now and peak between polls, limit, power trend, clocks, temperature,
    utilisation, PCIe generation x width against max, and state, per GPU.

    A lost GPU keeps its row, drawn in the ``gpu-table--lost`` style with "LOST".
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = DataTable.COMPONENT_CLASSES | {
        "gpu-table--lost",
        "gpu-table--warn",
        "gpu-table--ok",
        "gpu-table--spark-low",
        "gpu-table--spark-high",
    }
    DEFAULT_CSS = """
    GpuTable {
        height: auto;
    }
    """

    gpus: reactive[tuple[GpuReading, ...]] = reactive(tuple)
    """NVIDIA GPUs of the node's latest frame."""
    amd_gpus: reactive[tuple[AmdGpuReading, ...]] = reactive(tuple)
    """AMD GPUs of the node's latest frame."""
    power_trends: reactive[dict[str, tuple[float, ...]]] = reactive(dict)
    """Per-GPU power history by detail series name (``gpu[<uuid>].power_w``, ``amd[<card>].power_w``)."""
    narrow: reactive[bool] = reactive(False)
    """Leave out the `OPTIONAL` columns."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="none", zebra_stripes=False, show_cursor=False)
        self.can_focus = False
        self._update_pending = False

    def on_mount(self) -> None:
        self._add_columns()
        self._schedule()

    def _columns(self) -> list[tuple[str, str]]:
        return [(key, title) for key, title in COLUMNS if not (self.narrow and key in OPTIONAL)]

    def _add_columns(self) -> None:
        for key, title in self._columns():
            self.add_column(title, key=key, width=TREND_WIDTH if key == "trend" else None)

    def watch_narrow(self) -> None:
        if self.is_mounted:
            self.clear(columns=True)
            self._add_columns()
            self._schedule()

    def watch_gpus(self) -> None:
        self._schedule()

    def watch_amd_gpus(self) -> None:
        self._schedule()

    def watch_power_trends(self) -> None:
        self._schedule()

    def _schedule(self) -> None:
        if not self._update_pending and self.is_mounted:
            self._update_pending = True
            self.call_after_refresh(self.update_rows)

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"gpu-table--{name}", partial=True)

    def _spark(self, series: str, limit_w: float | None = None) -> RenderableType:
        """The peak-power trend of ``series`` from 0 W to the GPU's limit ``limit_w``."""
        data = self.power_trends.get(series, ())
        low, high = self._style("spark-low").color, self._style("spark-high").color
        if len(data) < 2 or low is None or high is None:
            return ""
        return row_lines.Bars(row_lines.sparkline(data, min(TREND_WIDTH, len(data)), low, high, "max",
                                                  gauge.power(limit_w)))

    def nvidia_cells(self, gpu: GpuReading) -> list[RenderableType]:
        """The row of one NVIDIA GPU."""
        key = gpu_key(gpu.uuid, gpu.index)
        if gpu.state == "lost":
            lost = self._style("lost")
            cells: list[RenderableType] = [Text(str(gpu.index), style=lost), Text(short_name(gpu.name), style=lost),
                                           Text("LOST", style=lost)]
            return cells + [Text(fmt.MISSING, style=lost) for _ in COLUMNS[3:]]
        warn = self._style("warn")
        over_limit = (gpu.power_peak_w is not None and gpu.power_limit_w is not None
                      and gpu.power_peak_w > gpu.power_limit_w)
        narrow = gpu.pcie_width is not None and gpu.pcie_width_max is not None and gpu.pcie_width < gpu.pcie_width_max
        link = f"{fmt.pcie(gpu.pcie_gen, gpu.pcie_width)}/{fmt.pcie(gpu.pcie_gen_max, gpu.pcie_width_max)}"
        return [
            str(gpu.index),
            plain(short_name(gpu.name)),
            Text("ok", style=self._style("ok")),
            fmt.number(gpu.power_w, 0),
            Text(fmt.number(gpu.power_peak_w, 0), style=warn if over_limit else ""),
            fmt.number(gpu.power_limit_w, 0),
            self._spark(f"gpu[{key}].power_w", gpu.power_limit_w),
            fmt.mhz(gpu.clock_sm_mhz),
            fmt.mhz(gpu.clock_mem_mhz),
            fmt.temp(gpu.temp_c),
            fmt.pct(gpu.util_pct),
            Text(link, style=warn if narrow else ""),
        ]

    def amd_cells(self, gpu: AmdGpuReading) -> list[RenderableType]:
        """The row of one AMD GPU (no peak, limit or PCIe figures in amdgpu's sysfs)."""
        return [
            plain(gpu.card),
            plain("AMD " + (gpu.pci_bus_id or gpu.card)),
            Text("ok", style=self._style("ok")),
            fmt.number(gpu.power_w, 0),
            fmt.MISSING,
            fmt.MISSING,
            self._spark(f"amd[{gpu.card}].power_w"),
            fmt.mhz(gpu.clock_sclk_mhz),
            fmt.mhz(gpu.clock_mclk_mhz),
            fmt.temp(gpu.temp_c),
            fmt.pct(gpu.busy_pct),
            fmt.MISSING,
        ]

    def update_rows(self) -> None:
        """Bring the rows in line with the reactives: update cells of known GPUs, add new
        ones, remove GPUs no longer listed."""
        self._update_pending = False
        wanted: list[tuple[str, Sequence[RenderableType]]] = [
            (gpu_key(g.uuid, g.index), self.nvidia_cells(g)) for g in self.gpus
        ]
        wanted += [(f"amd:{a.card}", self.amd_cells(a)) for a in self.amd_gpus]
        keys = {key for key, _ in wanted}
        for row_key in list(self.rows):
            if row_key.value not in keys:
                self.remove_row(row_key)
        shown = [i for i, (key, _) in enumerate(COLUMNS) if not (self.narrow and key in OPTIONAL)]
        for key, cells in wanted:
            if key in self.rows:
                for i in shown:
                    self.update_cell(key, COLUMNS[i][0], cells[i], update_width=True)
            else:
                self.add_row(*(cells[i] for i in shown), key=key)
