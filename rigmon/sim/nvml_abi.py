"""The C side of the fake NVML: return codes, enum values, handle encodings and ctypes out-parameters.

Shared by the symbol tables of `rigmon.sim.nvml.FakeNvmlLibrary` (`rigmon.sim.nvml_devices`,
`nvml_fields`, `nvml_processes`, `nvml_events`, `nvml_control`); the values are nvml.h's.
"""

from __future__ import annotations

import ctypes
from typing import Any

SUCCESS = 0
ERROR_UNINITIALIZED = 1
ERROR_INVALID_ARGUMENT = 2
ERROR_NOT_SUPPORTED = 3
#: A write by a process that is not root.
ERROR_NO_PERMISSION = 4
ERROR_INSUFFICIENT_SIZE = 7
ERROR_NOT_FOUND = 6
ERROR_DRIVER_NOT_LOADED = 9
ERROR_TIMEOUT = 10
ERROR_FUNCTION_NOT_FOUND = 13
ERROR_GPU_IS_LOST = 15

# NVML enum values the symbols compare against (nvml.h; the C ABI, stable across versions).
TOTAL_POWER_SAMPLES = 0
VALUE_TYPE_UNSIGNED_INT = 1
PERF_POLICY_POWER = 0
PERF_POLICY_THERMAL = 1
TEMPERATURE_GPU = 0
MEMORY_ERROR_TYPE_CORRECTED = 0
ECC_COUNTER_AGGREGATE = 1
VALUE_TYPE_UNSIGNED_LONG_LONG = 3

#: Device handles are these plus the GPU index; event sets these plus a serial number.
HANDLE_BASE = 0x1000
EVENT_SET_BASE = 0x50000
NO_INSTANCE = 0xFFFFFFFF
#: NVML_VALUE_NOT_AVAILABLE for an unsigned long long (usedGpuMemory unknown).
NOT_AVAILABLE_ULL = 0xFFFFFFFFFFFFFFFF

#: nvmlErrorString's answers for the codes a caller prints; the rest read "Fake NVML error".
ERROR_TEXT = {
    ERROR_NOT_FOUND: b"Not Found",
    ERROR_TIMEOUT: b"Timeout",
}


def set_out(out: Any, value: Any) -> None:
    """Write through a ``byref()`` out-parameter."""
    out._obj.value = value


def int_arg(arg: Any) -> int:
    """A by-value argument: a ctypes scalar or a plain int."""
    return int(arg.value) if hasattr(arg, "value") else int(arg)


def handle_value(handle: Any) -> int:
    """The integer a device or event-set handle (an opaque pointer) carries."""
    return int(ctypes.cast(handle, ctypes.c_void_p).value or 0)


def write_handle(out: Any, value: int) -> None:
    """Write a handle (an opaque pointer) through a ``byref()`` out-parameter."""
    target = out._obj
    ctypes.c_void_p.from_address(ctypes.addressof(target)).value = value

