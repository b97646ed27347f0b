"""GpuGroup: the node screen's box for GPUs: total power trend, a row per GPU, bus errors, GPU events."""

from __future__ import annotations

import time
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from rigmon.schema import Event, Frame, GpuReading
from rigmon.tui import format as fmt
from rigmon.tui import gauge
from rigmon.tui.text import plain
from rigmon.tui.widgets.gpu_table import GpuTable
from rigmon.tui.widgets.source_group import NARROW_WIDTH, Level, SourceGroup

#: Event kinds listed under the GPU table.
GPU_EVENT_KINDS = frozenset({"xid", "gpu_lost", "gpu_off_bus", "pcie_aer"})
#: GPU events listed at most, newest first.
GPU_EVENTS_SHOWN = 5


def bus_errors(gpu: GpuReading) -> str | None:
    """NVLink replay/CRC and PCIe replay counts of one GPU when any is above zero, else ``None``."""
    replay = sum(link.replay_total or 0 for link in gpu.nvlinks)
    crc = sum((link.crc_flit_total or 0) + (link.crc_data_total or 0) for link in gpu.nvlinks)
    pcie = gpu.pcie_replay_total or 0
    if not (replay or crc or pcie):
        return None
    rate = sum(link.replay_per_s or 0.0 for link in gpu.nvlinks)
    parts = [f"NVLink replay {replay}" + (f" (+{rate:.1f}/s)" if rate else ""), f"CRC {crc}", f"PCIe replay {pcie}"]
    return f"GPU {gpu.index}: " + ", ".join(parts)


class GpuGroup(SourceGroup):
    """Total GPU power with a max-keeping trend, GPUs working of listed, one `GpuTable` row
    per GPU (NVIDIA and AMD), NVLink/PCIe error counts, and recent Xid, lost and AER events."""

    TITLE: ClassVar[str] = "GPUs"
    COLLECTORS: ClassVar[tuple[str, ...]] = ("gpu", "amd_gpu")

    def compose_parts(self) -> ComposeResult:
        yield GpuTable(id="gpu-table")
        yield Static(id="gpu-events")

    def has_parts(self, frame: Frame) -> bool:
        return bool(frame.readings.gpus or frame.readings.amd_gpus)

    def body(self, frame: Frame) -> RenderableType | None:
        readings = frame.readings
        if not readings.gpus and not readings.amd_gpus:
            return None
        lost = [g for g in readings.gpus if g.state == "lost"]
        working = len(readings.gpus) - len(lost) + len(readings.amd_gpus)
        powers = [g.power_w for g in readings.gpus if g.power_w is not None]
        powers += [a.power_w for a in readings.amd_gpus if a.power_w is not None]
        limits = [g.power_limit_w for g in readings.gpus if g.state != "lost" and g.power_limit_w is not None]
        parts: list[RenderableType] = [self.trend("power", "gpu_power_w", "max", fmt.watts(sum(powers) if powers else None),
                                                  gauge=gauge.power(sum(limits) if limits else None))]
        count = Text.assemble(self.label("GPUs        "), f"{working} of {len(readings.gpus) + len(readings.amd_gpus)} working")
        if lost:
            count.append("  ")
            count.append(f"{len(lost)} lost: " + ", ".join(f"GPU {g.index} ({g.pci_bus_id or fmt.MISSING})" for g in lost),
                         style=self.style_of("bad"))
        parts.append(count)
        for gpu in readings.gpus:
            errors = bus_errors(gpu)
            if errors:
                parts.append(Text.assemble(self.label("bus errors  "), (errors, self.style_of("warn"))))
        return Group(*parts)

    def update_parts(self, frame: Frame | None) -> None:
        table = self.query_one(GpuTable)
        readings = frame.readings if frame is not None else None
        table.display = readings is not None and bool(readings.gpus or readings.amd_gpus)
        table.narrow = 0 < self.content_size.width < NARROW_WIDTH
        table.gpus = readings.gpus if readings else ()
        table.amd_gpus = readings.amd_gpus if readings else ()
        table.power_trends = {k: v for k, v in self.details.items() if k.startswith(("gpu[", "amd["))}
        events = self.query_one("#gpu-events", Static)
        shown = [e for e in self.events if e.kind in GPU_EVENT_KINDS][::-1][:GPU_EVENTS_SHOWN]
        events.display = table.display or bool(shown)
        events.update(self._events_table(shown))

    def _events_table(self, events: list[Event]) -> RenderableType:
        if not events:
            return Text("no Xid, lost-GPU or PCIe AER events", style=self.style_of("absent"))
        table = Table(box=None, padding=(0, 1), show_edge=False, show_header=False)
        table.add_column(no_wrap=True)
        table.add_column(no_wrap=True)
        table.add_column(overflow="fold")
        for event in events:
            level: Level | None = "bad" if event.severity == "critical" else "warn" if event.severity == "warning" else None
            # The agent's own timestamp, in UTC so every node reads the same.
            stamp = time.strftime("%H:%M:%S", time.gmtime(event.at))
            table.add_row(self.label(stamp), self.styled(event.kind, level), plain(event.message))
        return table
