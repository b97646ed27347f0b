"""Fake NVML process symbols: running compute/graphics processes and per-process utilization."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rigmon.sim.nvml_abi import (
    ERROR_INSUFFICIENT_SIZE,
    ERROR_NOT_FOUND,
    NOT_AVAILABLE_ULL,
    NO_INSTANCE,
    SUCCESS,
    int_arg,
    set_out,
)
from rigmon.sim.nvml_machine import FakeGpu

if TYPE_CHECKING:
    from rigmon.sim.nvml import FakeNvmlLibrary


def process_symbols(lib: FakeNvmlLibrary) -> dict[str, Callable[..., Any]]:
    """The running-process and per-process utilization symbols for ``lib``'s symbol table."""
    s: dict[str, Callable[..., Any]] = {}

    def running(name: str, kind: str) -> Callable[[Any, Any, Any], int]:
        # C: nvmlDeviceGet*RunningProcesses_v3(device, &count, infos): with too small a
        # buffer (pynvml first passes none) it sets count and answers INSUFFICIENT_SIZE.
        def symbol(handle: Any, count_out: Any, infos: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                procs = [p for p in gpu.processes if p.kind == kind]
                room = count_out._obj.value
                set_out(count_out, len(procs))
                if not procs:
                    return SUCCESS
                if infos is None or room < len(procs):
                    return ERROR_INSUFFICIENT_SIZE
                for i, proc in enumerate(procs):
                    infos[i].pid = proc.pid
                    infos[i].usedGpuMemory = NOT_AVAILABLE_ULL if proc.used_bytes is None else proc.used_bytes
                    infos[i].gpuInstanceId = NO_INSTANCE
                    infos[i].computeInstanceId = NO_INSTANCE
                return SUCCESS

            return lib.device_call(name, handle, fill)

        return symbol

    def process_utilization(handle: Any, buf: Any, count_out: Any, since: Any) -> int:
        def fill(gpu: FakeGpu) -> int:
            if gpu.process_sample_us <= int_arg(since) or not gpu.processes:
                return ERROR_NOT_FOUND
            if buf is None:
                set_out(count_out, len(gpu.processes))
                return ERROR_INSUFFICIENT_SIZE
            room = count_out._obj.value
            for i, proc in enumerate(gpu.processes[:room]):
                buf[i].pid = proc.pid
                buf[i].timeStamp = gpu.process_sample_us
                buf[i].smUtil = proc.sm_pct
                buf[i].memUtil = proc.mem_pct
                buf[i].encUtil = 0
                buf[i].decUtil = 0
            set_out(count_out, min(room, len(gpu.processes)))
            return SUCCESS

        return lib.device_call("nvmlDeviceGetProcessUtilization", handle, fill)

    # _v3 came with R510; R470-era drivers export only _v2 (the same nvmlProcessInfo_v2_t layout):
    # a machine's ``missing_symbols`` leaves out the newer one, as such a driver does.
    for version in ("_v2", "_v3"):
        for kind in ("compute", "graphics"):
            name = f"nvmlDeviceGet{kind.capitalize()}RunningProcesses{version}"
            s[name] = running(name, kind)
    s["nvmlDeviceGetProcessUtilization"] = process_utilization
    return s
