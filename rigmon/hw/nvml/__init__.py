"""NVML access: lazy init, one error gate per value, a watchdog around every poll, one binding per machine.

This package is the only code that imports ``pynvml`` (nvidia-ml-py). Collectors get an `Nvml`
from `open_nvml` (and an `NvmlProcesses` from `open_nvml_processes`: the same binding), which
returns plain frozen records of raw NVML values (milliwatts, millijoules, bitmasks) with ``None``
for every value the GPU or driver does not give.

Modules: `watchdog` (the watchdog thread, the call's target, the errors), `calls` (the error gate,
direct calls, buffers, field decoding), `facts` (what a GPU answers the same on every poll),
`poll` (the per-poll reads), `processes` (process lists), `xid` (Xid events), `binding`
(`PynvmlNvml`, the shared binding per machine), `records` (the records and the seams).

Binding (how one process serves several machines). pynvml keeps one global library
object, ``pynvml.nvmlLib``. On a real node that is ``libnvidia-ml.so.1`` and there is one
machine. The simulator runs many nodes' agents in one process and installs a single fake
library beneath pynvml that holds every simulated node's GPUs. To know which node a call
is for, every `PynvmlNvml` is bound to a *target*: the absolute path of the root its
agent reads (``open_nvml(ctx.root)``). Each call runs in the binding's own watchdog
thread (the Xid event wait: in the thread that waits) with the context variable behind
`current_target` set to that target; the real driver ignores it, and the fake library reads it
to pick the node's GPUs. Handles and event sets therefore never need to encode the node, and
pynvml's own wrappers, structures and error classes run unchanged.
"""

from __future__ import annotations

from rigmon.hw.nvml.binding import INIT_TIMEOUT_S, PynvmlNvml, SharedNvml, open_nvml, open_nvml_processes
from rigmon.hw.nvml.facts import FACTS_EVERY, FI_NVLINK_LINK_COUNT, MAX_NVLINKS
from rigmon.hw.nvml.plan import (
    FI_ECC_DBE_VOLATILE,
    FI_ECC_SBE_VOLATILE,
    FI_ENERGY,
    FI_NVLINK_CRC_DATA,
    FI_NVLINK_CRC_FLIT,
    FI_NVLINK_RECOVERY,
    FI_NVLINK_REPLAY,
    FI_NVLINK_STATE,
    FI_PCIE_REPLAY,
    FI_POWER_INSTANT,
    POWER_SAMPLES_PER_CALL,
)
from rigmon.hw.nvml.poll import TOTAL_POWER_SAMPLES
from rigmon.hw.nvml.records import (
    NvLinkData,
    Nvml,
    NvmlDeviceData,
    NvmlGpuProcesses,
    NvmlProcess,
    NvmlProcesses,
    NvmlProcessUtil,
    NvmlXid,
)
from rigmon.hw.nvml.watchdog import (
    NvmlHung,
    NvmlStarting,
    NvmlUnavailable,
    Watchdog,
    bind_library,
    current_target,
)
from rigmon.hw.nvml.xid import EVENT_XID

__all__ = [
    "EVENT_XID",
    "FACTS_EVERY",
    "FI_ECC_DBE_VOLATILE",
    "FI_ECC_SBE_VOLATILE",
    "FI_ENERGY",
    "FI_NVLINK_CRC_DATA",
    "FI_NVLINK_CRC_FLIT",
    "FI_NVLINK_LINK_COUNT",
    "FI_NVLINK_RECOVERY",
    "FI_NVLINK_REPLAY",
    "FI_NVLINK_STATE",
    "FI_PCIE_REPLAY",
    "FI_POWER_INSTANT",
    "INIT_TIMEOUT_S",
    "MAX_NVLINKS",
    "POWER_SAMPLES_PER_CALL",
    "TOTAL_POWER_SAMPLES",
    "NvLinkData",
    "Nvml",
    "NvmlDeviceData",
    "NvmlGpuProcesses",
    "NvmlHung",
    "NvmlProcess",
    "NvmlProcessUtil",
    "NvmlProcesses",
    "NvmlStarting",
    "NvmlUnavailable",
    "NvmlXid",
    "PynvmlNvml",
    "SharedNvml",
    "Watchdog",
    "bind_library",
    "current_target",
    "open_nvml",
    "open_nvml_processes",
]
