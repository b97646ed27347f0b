"""SimKernelLog: a simulated node's kernel log, /dev/kmsg records appended to a file in its tree."""

from __future__ import annotations

from rigmon.sim.node import SimNode
from rigmon.sim.tree import Tree

KMSG_PATH = "/dev/kmsg"
#: SimHost starts its uptime here; record timestamps use the same boot so they date right.
BOOT_UPTIME_S = 3600.0
LEVEL_ERR = 3
LEVEL_WARNING = 4
LEVEL_INFO = 6

_BOOT_LINES = (
    (LEVEL_INFO, "Linux version 6.8.0-49-generic (buildd@lcy02-amd64-103) #49-Ubuntu SMP PREEMPT_DYNAMIC"),
    (LEVEL_WARNING, "nvidia: loading out-of-tree module taints kernel."),
    (LEVEL_INFO, "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024"),
)


def escape_kmsg(text: str) -> str:
    """Escape like the kernel: backslash and non-printable bytes become ``\\xNN``."""
    out: list[str] = []
    for ch in text:
        if ch == "\\" or not (" " <= ch <= "~"):
            out.extend(f"\\x{b:02x}" for b in ch.encode())
        else:
            out.append(ch)
    return "".join(out)


class SimKernelLog:
    """The kernel log of a simulated node; other devices call `log` while they advance.

    Add it to ``node.devices`` before the devices that log, so its time is current.
    """

    def __init__(self) -> None:
        self.seq = 1000
        self.t_s = 0.0
        self._pending: list[str] = []
        self._started = False

    def log(self, level: int, message: str, fields: dict[str, str] | None = None) -> None:
        """Queue one record, stamped with the current simulated time."""
        self.seq += 1
        ts_us = int((BOOT_UPTIME_S + self.t_s) * 1_000_000)
        record = f"{level},{self.seq},{ts_us},-;{escape_kmsg(message)}\n"
        for key, value in (fields or {}).items():
            record += f" {key}={escape_kmsg(value)}\n"
        self._pending.append(record)

    def advance(self, node: SimNode, t_s: float, dt_s: float) -> None:
        self.t_s = t_s
        if not self._started:
            self._started = True
            for level, message in _BOOT_LINES:
                self.log(level, message)

    def write(self, tree: Tree) -> None:
        if not tree.path(KMSG_PATH).exists():
            tree.write(KMSG_PATH, "")
        if self._pending:
            # One append per step: a reader sees whole records.
            tree.append(KMSG_PATH, "".join(self._pending))
            self._pending.clear()

    def close(self) -> None:
        """Nothing to release."""
