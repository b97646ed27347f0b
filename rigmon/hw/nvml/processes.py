"""The processes NVML lists on each GPU (compute and graphics), with per-process utilisation samples."""

from __future__ import annotations

import ctypes
import struct
from typing import Any

import pynvml

from rigmon.hw.nvml.calls import REFUSED_CODES, Gate, pct, symbol
from rigmon.hw.nvml.poll import DeviceReader
from rigmon.hw.nvml.records import NvmlGpuProcesses, NvmlProcess, NvmlProcessUtil

#: The running-process list functions, by the list they give, newest first (C: ``(device,
#: unsigned *count, nvmlProcessInfo_t *infos)``; with too small an array the driver says how many
#: and answers INSUFFICIENT_SIZE). ``_v3`` came with R510; R470-era drivers (still common on
#: second-hand V100 rigs) export only ``_v2``, whose ``nvmlProcessInfo_v2_t`` has the same layout.
LISTS = (("graphics", ("nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2")),
         ("compute", ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2")))
#: Processes one list array holds at first; it grows when a GPU runs more.
FIRST_ROOM = 16
#: ``usedGpuMemory`` when the driver does not know it (NVML_VALUE_NOT_AVAILABLE for an unsigned long long).
_NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF


class _ProcessInfo(ctypes.Structure):
    """``nvmlProcessInfo_t`` (v2/v3 layout) as a plain ctypes structure (pynvml's converts on every access)."""

    _fields_ = pynvml.c_nvmlProcessInfo_v3_t._fields_


#: ``nvmlProcessInfo_t`` as bytes: pid, then usedGpuMemory (8-byte aligned), then the two instance ids.
_INFO_LAYOUT = struct.Struct("@I4xQII")
assert _INFO_LAYOUT.size == ctypes.sizeof(_ProcessInfo), "nvmlProcessInfo_t changed its layout"


class _Lists:
    """One GPU's list arrays and count, allocated once (grown when a GPU runs more processes), and
    its last answer while no process ran (the same record again while none runs)."""

    __slots__ = ("room", "infos", "count", "count_ref", "idle")

    def __init__(self) -> None:
        self.room = FIRST_ROOM
        self.infos = (_ProcessInfo * FIRST_ROOM)()
        self.count = ctypes.c_uint()
        self.count_ref = ctypes.byref(self.count)
        self.idle: NvmlGpuProcesses | None = None


#: Per device handle (its pointer value), the list arrays; dropped with the binding.
_ListsBy = dict[int, _Lists]


def read_processes(devices: DeviceReader, lists: _ListsBy, index: int, since_us: int) -> NvmlGpuProcesses:
    """Running compute and graphics processes of GPU ``index``, and utilisation samples newer than ``since_us``.

    The handle and UUID come from the GPU's poll plan (made when missing, never refreshed from
    here: the GPU poll owns the facts' schedule), so a poll of the processes costs the two lists
    (and the utilisation samples when a process runs).
    """
    plan, lost = devices.plan(index, refresh=False)
    if plan is None:
        return NvmlGpuProcesses(index=index, uuid=None, lost=lost, listed=False)
    gate = Gate()
    handle = plan.handle
    buffers = lists.get(index)
    if buffers is None:
        buffers = lists[index] = _Lists()
    procs: dict[int, NvmlProcess] = {}
    listed = False
    for kind, names in LISTS:
        # A process in both lists (CUDA and OpenGL) is one process: compute (asked last) wins.
        got = _list(gate, plan.refused, handle, names, buffers)
        if got is None:
            continue
        listed = True
        for pid, used in got:
            procs[pid] = NvmlProcess(pid=pid, used_bytes=None if used == _NOT_AVAILABLE else used, kind=kind)
        if gate.lost:
            break
    if not procs and not gate.lost:
        idle = buffers.idle
        if idle is None or idle.listed != listed or idle.uuid != plan.facts.uuid:
            idle = buffers.idle = NvmlGpuProcesses(index=index, uuid=plan.facts.uuid, lost=False, listed=listed)
        return idle
    utils: tuple[NvmlProcessUtil, ...] = ()
    if procs and not gate.lost:
        utils = _process_utils(gate, handle, since_us)
    if gate.lost:
        devices.drop(index)
        lists.pop(index, None)
    return NvmlGpuProcesses(index=index, uuid=plan.facts.uuid, lost=gate.lost, listed=listed,
                            processes=tuple(procs.values()), utils=utils)


def _list(gate: Gate, refused: set[tuple[str, tuple[int, ...]]], handle: Any, names: tuple[str, ...],
          buffers: _Lists) -> list[tuple[int, int]] | None:
    """One running-process list as ``(pid, used bytes or NOT_AVAILABLE)``, through the newest of
    ``names`` the driver has; ``None`` when it gives none of them (refused: not asked again until
    the GPU's plan is made again)."""
    for name in names:
        key = (name, ())
        fn = None if key in refused else symbol(name)
        if fn is None:
            refused.add(key)
            continue
        ret = _call(fn, handle, buffers)
        if ret == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND:
            refused.add(key)  # an older driver: its older version, at once
            continue
        if not gate.answered(ret):
            if ret in REFUSED_CODES:
                refused.add(key)
            return None
        count = min(buffers.count.value, buffers.room)
        if not count:
            return []
        raw = ctypes.string_at(ctypes.addressof(buffers.infos), count * _INFO_LAYOUT.size)
        return [(pid, used) for pid, used, _, _ in _INFO_LAYOUT.iter_unpack(raw)]
    return None


def _call(fn: Any, handle: Any, buffers: _Lists) -> int:
    """Call a process-list function into the GPU's kept array, growing it until the list fits."""
    while True:
        buffers.count.value = buffers.room
        ret: int = fn(handle, buffers.count_ref, buffers.infos)
        if ret == pynvml.NVML_ERROR_INSUFFICIENT_SIZE and buffers.count.value > buffers.room:
            # More processes than room: grow (with slack for those starting meanwhile) and ask again.
            buffers.room = buffers.count.value * 2 + 5
            buffers.infos = (_ProcessInfo * buffers.room)()
            continue
        return ret


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
