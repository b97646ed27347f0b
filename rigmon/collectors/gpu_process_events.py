"""The events of the GPU processes collector: a process started on a GPU, released it, exited, or left it.

Pure: a process's reading (and what /proc said of it when it left) in, an `EventDraft` out.
The collector is `rigmon.collectors.gpu_processes`.
"""

from __future__ import annotations

from rigmon.collectors.base import EventDraft
from rigmon.collectors.proc_lookup import ProcInfo
from rigmon.collectors.process_files import exit_text
from rigmon.schema import GpuProcessReading


def where(reading: GpuProcessReading) -> str:
    """The GPU a process is on, as messages say it: ``GPU 3``, ``AMD GPU 0000:c3:00.0``."""
    if reading.vendor == "nvidia":
        return f"GPU {reading.gpu_index}"
    return f"AMD GPU {reading.pci_bus_id}"


def subject(reading: GpuProcessReading) -> str:
    """The event's subject: the GPU (``gpu:3``, ``amd_gpu:0000:c3:00.0``)."""
    return f"gpu:{reading.gpu_index}" if reading.vendor == "nvidia" else f"amd_gpu:{reading.pci_bus_id}"


def who(reading: GpuProcessReading) -> str:
    """The process, as messages say it: ``python3 train.py (pid 4242)``."""
    return f"{reading.command or 'process'} (pid {reading.pid})"


def process_data(reading: GpuProcessReading) -> dict[str, str | int | float | bool | None]:
    """The data every process event carries."""
    return {"pid": reading.pid, "vendor": reading.vendor, "gpu_index": reading.gpu_index,
            "uuid": reading.gpu_uuid, "pci_bus_id": reading.pci_bus_id, "user": reading.user,
            "command": reading.command, "gpu_mem_bytes": reading.gpu_mem_bytes,
            "in_namespace": reading.in_namespace, "started_at": reading.started_at}


def started_event(reading: GpuProcessReading) -> EventDraft:
    """``gpu_process_started``: a process new on a GPU."""
    user = f" by {reading.user}" if reading.user else ""
    return EventDraft(kind="gpu_process_started", severity="info", subject=subject(reading),
                      message=f"{who(reading)}{user} started on {where(reading)}",
                      data=process_data(reading))


def exit_visible(before: GpuProcessReading, info: ProcInfo) -> bool:
    """Whether the agent's /proc can tell if a process gone from its GPU's list exited: it shows the
    PID now, or showed it while the process held the GPU (its entry gone since: it exited). A PID it
    never showed (another PID namespace, a hidden /proc entry) may run on without the GPU."""
    return info.visible or before.in_namespace


def left_event(before: GpuProcessReading, info: ProcInfo, alive: bool) -> EventDraft:
    """The event of a process gone from its GPU's list: ``gpu_process_released`` while it runs on
    (``alive``), ``gpu_process_left`` when the agent cannot see whether it exited (`exit_visible`),
    else ``gpu_process_exited`` with the exit status /proc holds (``info``: a zombie's)."""
    data = process_data(before)
    if alive:
        return EventDraft(kind="gpu_process_released", severity="info", subject=subject(before),
                          message=f"{who(before)} released {where(before)} (still running)",
                          data=data)
    if not exit_visible(before, info):
        return EventDraft(kind="gpu_process_left", severity="info", subject=subject(before),
                          message=f"{who(before)} left {where(before)} (exit not visible to the agent)",
                          data=data)
    status = info.exit_status
    data["exit_status"] = status
    data["exit_code"] = None if status is None or status & 0x7F else (status >> 8) & 0xFF
    data["exit_signal"] = None if status is None or not status & 0x7F else status & 0x7F
    failed = status is not None and status != 0
    return EventDraft(kind="gpu_process_exited", severity="warning" if failed else "info",
                      subject=subject(before),
                      message=f"{who(before)} exited{exit_text(status)} on {where(before)}",
                      data=data)
