"""GpuGroup: the node screen's box for GPUs: total power trend, a row per GPU, the processes on them,
bus errors, GPU events."""

from __future__ import annotations

import time
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from rigmon.schema import Event, Frame, GpuReading, Readings
from rigmon.tui import format as fmt
from rigmon.tui import gauge
from rigmon.tui.text import plain
from rigmon.tui.widgets.gpu_process_table import GpuProcessTable, agent_in_other_namespace, namespace_note
from rigmon.tui.widgets.gpu_table import GpuTable, ecc_nonzero, reason_parts
from rigmon.tui.widgets.source_group import Level, SourceGroup

#: Event kinds listed under the GPU table (a process leaving its GPU where the agent cannot see whether it
#: exited, ``gpu_process_left``, with the exits).
GPU_EVENT_KINDS = frozenset({"xid", "gpu_lost", "gpu_off_bus", "pcie_aer", "gpu_process_exited",
                             "gpu_process_left"})
#: Throttle reasons not worth a folded line of their own (clocks free, or idle).
QUIET_REASONS = frozenset({"none", "idle", fmt.MISSING})
#: GPU events listed at most, newest first.
GPU_EVENTS_SHOWN = 5
#: What the event list says when there is none of `GPU_EVENT_KINDS`: a lost GPU or one off the bus is
#: "lost-GPU"; a process's exit or its leaving the GPU unseen (``gpu_process_left``) is "exit/leave".
NO_GPU_EVENTS = "no Xid, lost-GPU, PCIe AER or process exit/leave events"


def _counted(name: str, total: int, per_s: float) -> str:
    """``CRC 4466 (+12.0/s)``: a counter since driver load, with its rate while it rises."""
    return f"{name} {total}" + (f" (+{per_s:.1f}/s)" if per_s else "")


def bus_errors(gpu: GpuReading) -> str | None:
    """NVLink replay/CRC and PCIe replay counts of one GPU, each with its rate while it rises, when
    any is above zero, else ``None``."""
    replay = sum(link.replay_total or 0 for link in gpu.nvlinks)
    crc = sum((link.crc_flit_total or 0) + (link.crc_data_total or 0) for link in gpu.nvlinks)
    pcie = gpu.pcie_replay_total or 0
    if not (replay or crc or pcie):
        return None
    parts = [_counted("NVLink replay", replay, sum(link.replay_per_s or 0.0 for link in gpu.nvlinks)),
             _counted("CRC", crc, sum(link.crc_flit_per_s or 0.0 for link in gpu.nvlinks)),
             _counted("PCIe replay", pcie, gpu.pcie_replay_per_s or 0.0)]
    return f"GPU {gpu.index}: " + ", ".join(parts)


def gpu_memory_held(readings: Readings) -> int | None:
    """GPU memory the listed processes hold, in bytes (``None`` when no process says)."""
    sizes = [p.gpu_mem_bytes for p in readings.gpu_processes if p.gpu_mem_bytes is not None]
    return sum(sizes) if sizes else None


class GpuGroup(SourceGroup):
    """Total GPU power with a max-keeping trend, GPUs working of listed, one `GpuTable` row
    per GPU (NVIDIA and AMD), the processes on them (`GpuProcessTable`), NVLink/PCIe error
    counts, and recent Xid, lost, AER and process exit or leave events. On a narrow screen the throttle
    reasons, fan and ECC counts fold into one line per GPU under the table."""

    TITLE: ClassVar[str] = "GPUs"
    COLLECTORS: ClassVar[tuple[str, ...]] = ("gpu", "amd_gpu", "gpu_processes")

    def compose_parts(self) -> ComposeResult:
        yield GpuTable(id="gpu-table")
        yield Static(id="gpu-folded")
        yield Static(id="gpu-processes-head")
        yield GpuProcessTable(id="gpu-processes")
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
        for name in ("gpu", "amd_gpu"):
            status = frame.collectors.get(name)
            if status is not None and status.state in ("hung", "error") and (
                    readings.gpus if name == "gpu" else readings.amd_gpus):
                # The agent keeps a hung call's last readings (NVML stuck in the driver): not current.
                why = f" ({status.error})" if status.error else ""
                count.append(f"  as last read: collector {name} {status.state}{why}", style=self.style_of("warn"))
        parts.append(count)
        errors = [e for e in map(bus_errors, readings.gpus) if e]
        if errors:
            # A grid, so that a line too long for a narrow box wraps under its value, not under the label.
            grid = Table.grid()
            grid.add_column(width=12, no_wrap=True)
            grid.add_column()
            for line in errors:
                grid.add_row(self.label("bus errors"), Text(line, style=self.style_of("warn")))
            parts.append(grid)
        return Group(*parts)

    def update_parts(self, frame: Frame | None) -> None:
        table = self.query_one(GpuTable)
        readings = frame.readings if frame is not None else None
        table.display = readings is not None and bool(readings.gpus or readings.amd_gpus)
        # As the processes below (`_update_processes`): the rows of this frame now, with the box's lines.
        table.set_reactive(GpuTable.available, self.content_size.width)
        table.set_reactive(GpuTable.gpus, readings.gpus if readings else ())
        table.set_reactive(GpuTable.amd_gpus, readings.amd_gpus if readings else ())
        table.set_reactive(GpuTable.power_trends, {k: v for k, v in self.details.items()
                                                   if k.startswith(("gpu[", "amd["))})
        table.update_rows()
        self._update_folded(table.folded)
        self._update_processes(readings, frame, table.display, self.content_size.width)
        events = self.query_one("#gpu-events", Static)
        shown = [e for e in self.events if e.kind in GPU_EVENT_KINDS][::-1][:GPU_EVENTS_SHOWN]
        events.display = table.display or bool(shown)
        events.update(self._events_table(shown))

    def on_gpu_table_folded(self, message: GpuTable.Folded) -> None:
        """The table left out (or took back) throttle, fan or ECC columns: fold them under it."""
        self._update_folded(message.columns)

    def _update_folded(self, columns: frozenset[str]) -> None:
        folded = self.query_one("#gpu-folded", Static)
        readings = self.frame.readings if self.frame is not None else None
        lines = self._folded_lines(readings, columns) if readings is not None and columns else []
        folded.display = bool(lines)
        folded.update(Text("\n").join(lines))

    def _folded_lines(self, readings: Readings, columns: frozenset[str]) -> list[Text]:
        """Per GPU, what the table left out of ``columns``: throttle reasons, fan, ECC errors."""
        lines: list[Text] = []
        for gpu in readings.gpus:
            if gpu.state != "ok":
                continue
            pieces: list[Text] = []
            reasons = [(name, level) for name, level in reason_parts(gpu.clock_reasons, gpu.clock_reasons_raw)
                       if name not in QUIET_REASONS]
            if reasons and "throttle" in columns:
                text = Text("throttle ")
                for i, (name, level) in enumerate(reasons):
                    if i:
                        text.append(", ")
                    text.append(name, style=self.style_of("bad" if level == "bad" else "warn") if level else "")
                pieces.append(text)
            if gpu.fan_pct is not None and "fan" in columns:
                pieces.append(Text(f"fan {fmt.pct(gpu.fan_pct)}"))
            if ecc_nonzero(gpu) and "ecc" in columns:
                pieces.append(Text(f"ECC {gpu.ecc_corrected_total} corrected, {gpu.ecc_uncorrected_total} uncorrected",
                                   style=self.style_of("bad") if gpu.ecc_uncorrected_total else self.style_of("warn")))
            if pieces:
                lines.append(Text.assemble(self.label(f"GPU {gpu.index:<8}"), Text("  ").join(pieces)))
        return lines

    def _update_processes(self, readings: Readings | None, frame: Frame | None, shown: bool, width: int) -> None:
        head = self.query_one("#gpu-processes-head", Static)
        procs_table = self.query_one(GpuProcessTable)
        procs = readings.gpu_processes if readings is not None else ()
        collector = frame.collectors.get("gpu_processes") if frame is not None else None
        # An agent older than the processes collector says nothing about them: say nothing either.
        head.display = shown and collector is not None
        procs_table.display = shown and bool(procs)
        if procs:
            gpus = {(p.vendor, p.gpu_index, p.pci_bus_id) for p in procs}
            held = gpu_memory_held(readings) if readings is not None else None
            memory = f", {fmt.size(held)} of GPU memory" if held is not None else ""
            # A process with no figure (hung on a lost GPU, NVML not answering) is not in the total: say so.
            unknown = sum(p.gpu_mem_bytes is None for p in procs)
            if memory and unknown:
                whose = "process's" if unknown == 1 else "processes'"
                memory += f" ({unknown} {whose} not known)"
            # A process on two GPUs has a row under each: it is one process.
            count = len({p.pid for p in procs})
            text = Text.assemble(self.label("processes   "),
                                 f"{count} on {len(gpus)} GPU{'' if len(gpus) == 1 else 's'}{memory}")
            if collector is not None and collector.state in ("hung", "error"):
                # The agent keeps a hung call's last list (NVML stuck in the driver): not current, a job
                # that ended since is still in it.
                why = f" ({collector.error})" if collector.error else ""
                text.append(f"; as last read: collector gpu_processes {collector.state}{why}", style=self.style_of("warn"))
            note = namespace_note(collector, procs)
            if note is None:
                head.update(text)
            else:
                # Once for the table, under the count (wrapping there on a narrow screen), not in each row.
                grid = Table.grid()
                grid.add_column(width=12, no_wrap=True)
                grid.add_column()
                grid.add_row("", Text(note, style=self.style_of("warn")))
                head.update(Group(text, grid))
        else:
            why = "no process on the GPUs" if collector is None or collector.state in ("ok", "absent") else \
                f"not known: collector gpu_processes {collector.state}"
            head.update(Text.assemble(self.label("processes   "), (why, self.style_of("absent"))))
        # Set without the watchers, and the rows brought in line now: the table's own update comes
        # after the next refresh, which drew this frame's total over the last frame's rows ("58.6 GiB
        # of GPU memory" above a single process of 81.6 GiB, when its memory moved between frames).
        procs_table.set_reactive(GpuProcessTable.available, width)
        procs_table.set_reactive(GpuProcessTable.now_at, frame.taken_at if frame is not None else None)
        procs_table.set_reactive(GpuProcessTable.amd_cards, {a.pci_bus_id: a.card for a in readings.amd_gpus
                                                              if a.pci_bus_id} if readings else {})
        procs_table.set_reactive(GpuProcessTable.lost_gpus, frozenset(g.index for g in readings.gpus
                                                                      if g.state == "lost") if readings else frozenset())
        procs_table.set_reactive(GpuProcessTable.other_namespace, agent_in_other_namespace(collector, procs))
        procs_table.set_reactive(GpuProcessTable.processes, procs)
        procs_table.update_rows()

    def _events_table(self, events: list[Event]) -> RenderableType:
        if not events:
            return Text(NO_GPU_EVENTS, style=self.style_of("absent"))
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
