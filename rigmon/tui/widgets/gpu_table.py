"""GpuTable: one row per GPU (NVIDIA keyed by UUID, AMD by PCI address), updated in place; throttle reason names."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from rich.console import RenderableType
from rich.style import Style
from rich.text import Text
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable

from rigmon.schema import AmdGpuReading, ClockReason, GpuReading
from rigmon.summary import amd_key, gpu_key, power_level
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
    ("fan", "fan"),
    ("util", "util"),
    ("vram", "VRAM GiB"),
    ("pcie", "PCIe/max"),
    ("throttle", "throttle"),
    ("ecc", "ECC corr/uncorr"),
)
#: Cells of the power trend column.
TREND_WIDTH = 12
#: Columns left out, in this order, until the table fits its box (an 80-column terminal leaves
#: them all out). `GpuGroup` folds the throttle reasons, fan and ECC counts of a left-out column
#: into lines under the table (`FOLDABLE`), and a peak above the limit keeps its warning colour,
#: so nothing that matters is lost and no cell is cut.
DROP_ORDER: tuple[str, ...] = ("trend", "mem", "name", "limit", "throttle", "fan", "ecc")
OPTIONAL = frozenset(DROP_ORDER)
FOLDABLE = frozenset({"throttle", "fan", "ecc"})
#: Columns shown only when some GPU has the value (a fan; ECC errors above zero).
WHEN_PRESENT = frozenset({"fan", "ecc"})
GIB = 1024**3

#: Clock event (throttle) reasons as an operator reads them (nvidia-smi's words, shortened).
REASON_NAMES: dict[ClockReason, str] = {
    "gpu_idle": "idle",
    "applications_clocks_setting": "app clocks",
    "sw_power_cap": "SW power cap",
    "hw_slowdown": "HW slowdown",
    "sync_boost": "sync boost",
    "sw_thermal_slowdown": "SW thermal",
    "hw_thermal_slowdown": "HW thermal",
    "hw_power_brake_slowdown": "HW power brake",
    "display_clock_setting": "display clocks",
    "board_limit": "board limit",
    "reliability": "reliability",
    "other": "other",
}
#: Reasons that mean the board itself pulled the clocks down: on an SXM2 rig, a sagging 12 V rail.
HARDWARE_REASONS: frozenset[ClockReason] = frozenset({"hw_slowdown", "hw_power_brake_slowdown"})
#: Reasons that cap the clocks without the hardware crying out.
CAPPING_REASONS: frozenset[ClockReason] = frozenset({"sw_power_cap", "sw_thermal_slowdown", "hw_thermal_slowdown",
                                                      "board_limit", "reliability"})


def reason_parts(reasons: tuple[ClockReason, ...] | None, raw: str | None = None) -> list[tuple[str, str]]:
    """``(name, level)`` of each throttle reason; level ``bad`` (hardware slowdown, power brake),
    ``warn`` (a cap) or ``""``. ``[("—", "")]`` when unknown, ``[("none", "")]`` when clocks run free.
    A bit rigmon does not know is ``other`` with NVML's mask ``raw`` (``other 0x1004``), to look it up."""
    if reasons is None:
        return [(fmt.MISSING, "")]
    if not reasons:
        return [("none", "")]
    other = "other"
    if raw:
        try:
            other = f"other 0x{int(raw, 16):X}"
        except ValueError:
            pass  # an agent's text, not a mask: "other" alone
    return [(other if r == "other" else REASON_NAMES.get(r, r),
             "bad" if r in HARDWARE_REASONS else "warn" if r in CAPPING_REASONS else "")
            for r in reasons]


def vram(used: int | None, total: int | None) -> str:
    """GPU memory used of total in GiB: ``13.9/15.8``."""
    if used is None and total is None:
        return fmt.MISSING
    return (f"{fmt.MISSING if used is None else f'{used / GIB:.1f}'}/"
            f"{fmt.MISSING if total is None else f'{total / GIB:.1f}'}")


#: GTT in use from which an AMD GPU's memory cell names it: a discrete card's job keeps a little there
#: (staging buffers), an APU's most of its memory.
GTT_SHOWN_BYTES = GIB


def amd_memory(gpu: AmdGpuReading) -> str:
    """An AMD GPU's VRAM used of total, and its GTT in use from `GTT_SHOWN_BYTES` on: ``0.4/0.5 +60.0 GTT``
    (a Strix Halo box, whose VRAM is the BIOS's small carve-out and whose job's memory is GTT)."""
    text = vram(gpu.vram_used_bytes, gpu.vram_total_bytes)
    if gpu.gtt_used_bytes is not None and gpu.gtt_used_bytes >= GTT_SHOWN_BYTES:
        text += f" +{gpu.gtt_used_bytes / GIB:.1f} GTT"
    return text


def ecc_nonzero(gpu: GpuReading) -> bool:
    """Whether the GPU counted any ECC error (corrected or not) since the driver loaded."""
    return bool(gpu.ecc_corrected_total or gpu.ecc_uncorrected_total)


def short_name(name: str | None) -> str:
    """A GPU's marketing name without the brand words: ``V100-SXM2-16GB``."""
    if name is None:
        return fmt.MISSING
    for prefix in ("NVIDIA ", "Tesla "):
        name = name.removeprefix(prefix)
    return name


class GpuTable(DataTable[RenderableType]):
    """Watts now and peak between polls, limit, power trend, clocks, temperature, fan,
    utilisation, VRAM used of total, PCIe generation x width against max, throttle reasons,
    ECC errors, and state, per GPU.

    A lost GPU keeps its row, drawn in the ``gpu-table--lost`` style with "LOST". The fan
    column shows only when a GPU has a fan, the ECC column only when a GPU counted errors;
    hardware slowdown and power brake reasons are drawn in the ``gpu-table--bad`` style.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = DataTable.COMPONENT_CLASSES | {
        "gpu-table--lost",
        "gpu-table--bad",
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
    """Per-GPU power history by detail series name (``gpu[<uuid>].power_w``, ``amd[<PCI address>].power_w``)."""
    available: reactive[int] = reactive(0)
    """Cells the table may take; optional columns go (`DROP_ORDER`) until it fits. 0: all columns."""

    @dataclass
    class Folded(Message):
        """The foldable columns left out changed (`FOLDABLE`): their values belong under the table."""

        columns: frozenset[str]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="none", zebra_stripes=False, show_cursor=False)
        self.can_focus = False
        self._update_pending = False
        self._shown_columns: list[str] = []
        #: Foldable columns left out by the last update.
        self.folded: frozenset[str] = frozenset()

    def on_mount(self) -> None:
        self._add_columns()
        self._schedule()

    def _present(self) -> set[str]:
        """The `WHEN_PRESENT` columns the GPUs have values for."""
        present = set()
        if any(g.fan_pct is not None for g in self.gpus):
            present.add("fan")
        if any(ecc_nonzero(g) for g in self.gpus):
            present.add("ecc")
        return present

    def _columns(self, dropped: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
        present = self._present()
        return [(key, title) for key, title in COLUMNS
                if key not in dropped and (key not in WHEN_PRESENT or key in present)]

    def fit(self, rows: Sequence[dict[str, RenderableType]]) -> frozenset[str]:
        """Columns to leave out so that ``rows`` fit `available` cells uncut (none when 0)."""
        columns = self._columns()
        if self.available <= 0:
            return frozenset()

        def width(key: str, title: str) -> int:
            if key == "trend":
                return TREND_WIDTH
            return max([cell_len(title), *(_cell_width(row[key]) for row in rows)])

        # A cell has one cell of padding either side.
        widths = {key: width(key, title) + 2 for key, title in columns}
        needed = sum(widths.values())
        dropped: set[str] = set()
        for key in DROP_ORDER:
            if needed <= self.available:
                break
            if key in widths:
                dropped.add(key)
                needed -= widths[key]
        return frozenset(dropped)

    def _add_columns(self, dropped: frozenset[str] = frozenset()) -> None:
        columns = self._columns(dropped)
        self._shown_columns = [key for key, _ in columns]
        for key, title in columns:
            self.add_column(title, key=key, width=TREND_WIDTH if key == "trend" else None)

    def watch_available(self) -> None:
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

    def _amd_series(self, gpu: AmdGpuReading) -> str:
        """The power history of an AMD GPU: by its PCI address (`amd_key`), or by its card from an agent
        that named it so (older agents)."""
        series = f"amd[{amd_key(gpu.pci_bus_id, gpu.card)}].power_w"
        old = f"amd[{gpu.card}].power_w"
        return old if series not in self.power_trends and old in self.power_trends else series

    def throttle_text(self, reasons: tuple[ClockReason, ...] | None, style: Style | str = "",
                      raw: str | None = None) -> Text:
        """Throttle reasons by name, hardware slowdown and power brake in the ``bad`` style."""
        text = Text(style=style)
        for i, (name, level) in enumerate(reason_parts(reasons, raw)):
            if i:
                text.append(", ")
            text.append(name, style=self._style(level) if level else "")
        return text

    def nvidia_cells(self, gpu: GpuReading) -> dict[str, RenderableType]:
        """The row of one NVIDIA GPU, by column key."""
        key = gpu_key(gpu.uuid, gpu.index)
        if gpu.state == "lost":
            lost = self._style("lost")
            cells: dict[str, RenderableType] = {k: Text(fmt.MISSING, style=lost) for k, _ in COLUMNS}
            cells.update(gpu=Text(str(gpu.index), style=lost), name=Text(short_name(gpu.name), style=lost),
                         state=Text("LOST", style=lost))
            return cells
        warn = self._style("warn")
        # A brief V100 peak over its limit is normal: amber only for what power_level calls a problem.
        over_limit = power_level(gpu.power_w, gpu.power_peak_w, gpu.power_limit_w) == "warn"
        narrow = gpu.pcie_width is not None and gpu.pcie_width_max is not None and gpu.pcie_width < gpu.pcie_width_max
        link = f"{fmt.pcie(gpu.pcie_gen, gpu.pcie_width)}/{fmt.pcie(gpu.pcie_gen_max, gpu.pcie_width_max)}"
        ecc = fmt.MISSING if gpu.ecc_corrected_total is None else f"{gpu.ecc_corrected_total}/{gpu.ecc_uncorrected_total}"
        return {
            "gpu": str(gpu.index),
            "name": plain(short_name(gpu.name)),
            "state": Text("ok", style=self._style("ok")),
            "power": fmt.number(gpu.power_w, 0),
            "peak": Text(fmt.number(gpu.power_peak_w, 0), style=warn if over_limit else ""),
            "limit": fmt.number(gpu.power_limit_w, 0),
            "trend": self._spark(f"gpu[{key}].power_w", gpu.power_limit_w),
            "sm": fmt.mhz(gpu.clock_sm_mhz),
            "mem": fmt.mhz(gpu.clock_mem_mhz),
            "temp": fmt.temp(gpu.temp_c),
            "fan": fmt.pct(gpu.fan_pct),
            "util": fmt.pct(gpu.util_pct),
            "vram": vram(gpu.mem_used_bytes, gpu.mem_total_bytes),
            "pcie": Text(link, style=warn if narrow else ""),
            "throttle": self.throttle_text(gpu.clock_reasons, raw=gpu.clock_reasons_raw),
            "ecc": Text(ecc, style=self._style("bad") if gpu.ecc_uncorrected_total else
                        warn if gpu.ecc_corrected_total else ""),
        }

    def amd_cells(self, gpu: AmdGpuReading) -> dict[str, RenderableType]:
        """The row of one AMD GPU (no peak, limit, fan, throttle or PCIe figures in amdgpu's sysfs)."""
        cells: dict[str, RenderableType] = {k: fmt.MISSING for k, _ in COLUMNS}
        cells.update(
            gpu=plain(gpu.card),
            name=plain("AMD " + (gpu.pci_bus_id or gpu.card)),
            state=Text("ok", style=self._style("ok")),
            power=fmt.number(gpu.power_w, 0),
            trend=self._spark(self._amd_series(gpu)),
            sm=fmt.mhz(gpu.clock_sclk_mhz),
            mem=fmt.mhz(gpu.clock_mclk_mhz),
            temp=fmt.temp(gpu.temp_c),
            util=fmt.pct(gpu.busy_pct),
            vram=amd_memory(gpu),
        )
        return cells

    def update_rows(self) -> None:
        """Bring the rows in line with the reactives: update cells of known GPUs, add new
        ones, remove GPUs no longer listed (and rebuild the columns when the fan or ECC
        column comes or goes, or the box's width leaves out other columns)."""
        self._update_pending = False
        wanted: list[tuple[str, dict[str, RenderableType]]] = [
            (gpu_key(g.uuid, g.index), self.nvidia_cells(g)) for g in self.gpus
        ]
        # By PCI address: a row (and the cursor on it) stays its GPU when a reboot renumbers the cards.
        wanted += [(f"amd:{amd_key(a.pci_bus_id, a.card)}", self.amd_cells(a)) for a in self.amd_gpus]
        dropped = self.fit([cells for _, cells in wanted])
        if [key for key, _ in self._columns(dropped)] != self._shown_columns:
            self.clear(columns=True)
            self._add_columns(dropped)
        folded = dropped & FOLDABLE
        if folded != self.folded:
            self.folded = folded
            self.post_message(self.Folded(folded))
        keys = {key for key, _ in wanted}
        for row_key in list(self.rows):
            if row_key.value not in keys:
                self.remove_row(row_key)
        shown = self._shown_columns
        for key, cells in wanted:
            if key in self.rows:
                for column in shown:
                    self.update_cell(key, column, cells[column], update_width=True)
            else:
                self.add_row(*(cells[column] for column in shown), key=key)


def _cell_width(cell: RenderableType) -> int:
    """Cells a text cell takes (its longest line); 0 for other renderables (they take what they get)."""
    if isinstance(cell, str):
        return cell_len(cell)
    if isinstance(cell, Text):
        return max((cell_len(line) for line in cell.plain.splitlines()), default=0)
    return 0
