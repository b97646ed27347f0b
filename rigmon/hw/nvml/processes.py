"""The processes NVML lists on each GPU (compute and graphics), with per-process utilisation samples."""

from __future__ import annotations

from typing import Any

import pynvml

from rigmon.hw.nvml.calls import Gate, pct
from rigmon.hw.nvml.poll import DeviceReader
from rigmon.hw.nvml.records import NvmlGpuProcesses, NvmlProcess, NvmlProcessUtil


def read_processes(devices: DeviceReader, index: int, since_us: int) -> NvmlGpuProcesses:
    """Running compute and graphics processes of GPU ``index``, and utilisation samples newer than ``since_us``.

    The handle and UUID come from the GPU's poll plan (made when missing, never refreshed from
    here: the GPU poll owns the facts' schedule), so a poll of the processes costs the lists only.
    """
    plan, lost = devices.plan(index, refresh=False)
    if plan is None:
        return NvmlGpuProcesses(index=index, uuid=None, lost=lost, listed=False)
    gate = Gate()
    handle = plan.handle
    compute = gate.get(pynvml.nvmlDeviceGetComputeRunningProcesses, handle)
    graphics = gate.get(pynvml.nvmlDeviceGetGraphicsRunningProcesses, handle)
    procs: dict[int, NvmlProcess] = {}
    for kind, listed in (("graphics", graphics), ("compute", compute)):
        for info in listed or ():
            used = info.usedGpuMemory
            # A process in both lists (CUDA and OpenGL) is one process: compute wins.
            procs[int(info.pid)] = NvmlProcess(pid=int(info.pid), used_bytes=None if used is None else int(used),
                                               kind=kind)
    utils: tuple[NvmlProcessUtil, ...] = ()
    if procs:
        utils = _process_utils(gate, handle, since_us)
    if gate.lost:
        devices.drop(index)
    return NvmlGpuProcesses(index=index, uuid=plan.facts.uuid, lost=gate.lost,
                            listed=compute is not None or graphics is not None,
                            processes=tuple(procs.values()), utils=utils)


def _process_utils(gate: Gate, handle: Any, since_us: int) -> tuple[NvmlProcessUtil, ...]:
    try:
        samples = pynvml.nvmlDeviceGetProcessUtilization(handle, since_us)
    except pynvml.NVMLError as exc:
        # NOT_FOUND: no sample newer than that; NOT_SUPPORTED: pre-Maxwell or vGPU.
        if exc.value == pynvml.NVML_ERROR_GPU_IS_LOST:
            gate.lost = True
        return ()
    return tuple(NvmlProcessUtil(pid=int(s.pid), timestamp_us=int(s.timeStamp),
                                 sm_pct=pct(s.smUtil), mem_pct=pct(s.memUtil)) for s in samples)
