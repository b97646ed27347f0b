"""``[gpu]`` (NVML, GPU events) and ``[kernel_log]`` (how the kernel log is read)."""

from __future__ import annotations

from typing import Literal

import msgspec

from rigmon.config.common import check_ranges


class GpuSection(msgspec.Struct, frozen=True, gc=False):
    """``[gpu]``: NVML, GPU events and the kernel log reader."""

    nvml_timeout_s: float = 2.0
    """An NVML call (or one GPU's batch of calls) running longer than this marks the GPU collector hung."""
    event_wait_s: float = 0.5
    """Seconds one wait for an NVML Xid event blocks before checking for shutdown."""
    kmsg_path: str = "/dev/kmsg"
    """Kernel log device below the root (the simulator writes a plain file there)."""
    kernel_log_lines: int = 200
    """Matched kernel log lines (Xid, AER, fallen off the bus) kept for snapshots."""

    def __post_init__(self) -> None:
        if self.nvml_timeout_s <= 0:
            raise ValueError("nvml_timeout_s must be positive")
        if not 0 < self.event_wait_s <= 10:
            raise ValueError("event_wait_s must be in (0, 10]")
        if self.kernel_log_lines < 1:
            raise ValueError("kernel_log_lines must be at least 1")
        if not self.kmsg_path.startswith("/"):
            raise ValueError("kmsg_path must be absolute")
        check_ranges(self, {"nvml_timeout_s": (0.01, 600.0), "kernel_log_lines": (1, 100_000)})


class KernelLogSection(msgspec.Struct, frozen=True, gc=False):
    """``[kernel_log]``: how the kernel log at ``gpu.kmsg_path`` is written."""

    format: Literal["auto", "kmsg", "dmesg", "journal"] = "auto"
    """``auto``: /dev/kmsg when the path is a character device, else recognised by its first line
    (/dev/kmsg records, ``dmesg`` with timestamps, ``journalctl -k``); ``kmsg``, ``dmesg`` (also a
    capture without timestamps, ``dmesg -t``) or ``journal`` (``journalctl -k``, syslog files)."""
