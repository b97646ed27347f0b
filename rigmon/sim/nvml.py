"""A fake NVML library bound beneath the real ``pynvml`` module, serving simulated GPUs.

How it works. pynvml calls C symbols on one global library object, ``pynvml.nvmlLib``.
`FakeNvmlLibrary` replaces that object (through `rigmon.hw.nvml.bind_library`, so only
``hw`` touches pynvml) with a namespace of plain Python functions named like the C
symbols, and the function-pointer cache is cleared, so pynvml's own
wrappers run unchanged: they build the real ctypes structures, check the return codes
and raise the real ``NVMLError_*`` classes.

Several machines in one process. The simulator runs every node's agent in one process,
but pynvml has one library slot. So there is one `FakeNvmlLibrary` per process
(`FAKE_NVML`), holding one `FakeNvmlMachine` per simulated node, keyed by the node's
root directory. The agent side binds each `rigmon.hw.nvml.PynvmlNvml` to its root and
runs every NVML call with that root as `rigmon.hw.nvml.current_target`; each symbol
here looks the machine up by that target. A call for a root no machine serves answers
DRIVER_NOT_LOADED, which is exactly what a node without NVIDIA GPUs sees. Tests that call
pynvml directly (no target) use the machine served under ``None``.

Named failures (`FakeNvmlMachine.fail`): ``not_supported`` (a GPU answers NOT_SUPPORTED
for the named symbols, or every optional one), ``gpu_lost`` (every call on a GPU answers
GPU_IS_LOST), ``driver_missing`` (init and every call answer DRIVER_NOT_LOADED) and
``hang`` (every call, or only the named symbols, blocks until the failure is healed).

The machine side (GPU state, failures, Xid queues, ``nvml.toml`` loading) is
`rigmon.sim.nvml_machine`; its names are importable from here too.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

from rigmon.hw.nvml import bind_library, current_target
from rigmon.sim.nvml_machine import (
    NVLINK_COUNTERS,
    OPTIONAL_SYMBOLS,
    POWER_SAMPLE_BUFFER,
    V100_DEVICE_ID,
    V100_MEMORY_BYTES,
    V100_SUBSYSTEM_ID,
    FailureName,
    FakeGpu,
    FakeGpuProcess,
    FakeNvmlMachine,
    machine_from_toml,
    v100_sxm2_gpus,
)

# Public names, the machine's included: they lived in this module and stay importable from it.
__all__ = [
    "ERROR_DRIVER_NOT_LOADED",
    "ERROR_FUNCTION_NOT_FOUND",
    "ERROR_GPU_IS_LOST",
    "ERROR_INSUFFICIENT_SIZE",
    "ERROR_INVALID_ARGUMENT",
    "ERROR_NOT_FOUND",
    "ERROR_NOT_SUPPORTED",
    "ERROR_TIMEOUT",
    "ERROR_UNINITIALIZED",
    "FAKE_NVML",
    "FI_DEV_NVLINK_GET_STATE",
    "FI_DEV_NVLINK_LINK_COUNT",
    "FI_DEV_POWER_INSTANT",
    "MEMORY_ERROR_TYPE_CORRECTED",
    "NVLINK_COUNTERS",
    "OPTIONAL_SYMBOLS",
    "PERF_POLICY_POWER",
    "PERF_POLICY_THERMAL",
    "POWER_SAMPLE_BUFFER",
    "SUCCESS",
    "TEMPERATURE_GPU",
    "TOTAL_POWER_SAMPLES",
    "V100_DEVICE_ID",
    "V100_MEMORY_BYTES",
    "V100_SUBSYSTEM_ID",
    "VALUE_TYPE_UNSIGNED_INT",
    "FailureName",
    "FakeGpu",
    "FakeGpuProcess",
    "FakeNvmlLibrary",
    "FakeNvmlMachine",
    "GpuFn",
    "machine_from_toml",
    "serving",
    "v100_sxm2_gpus",
]

SUCCESS = 0
ERROR_UNINITIALIZED = 1
ERROR_INVALID_ARGUMENT = 2
ERROR_NOT_SUPPORTED = 3
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
FI_DEV_POWER_INSTANT = 186
FI_DEV_NVLINK_LINK_COUNT = 91
#: NVML_FI_DEV_NVLINK_GET_STATE: one link's state (1 up, 0 down), the link in scopeId.
FI_DEV_NVLINK_GET_STATE = 165
VALUE_TYPE_UNSIGNED_LONG_LONG = 3
#: Field ids answered from the same GPU state as the function each mirrors (nvml.h NVML_FI_DEV_*):
#: field id -> (that function's symbol, value type, value).
_FIELDS: dict[int, tuple[str, int, Callable[[FakeGpu], int]]] = {
    83: ("nvmlDeviceGetTotalEnergyConsumption", VALUE_TYPE_UNSIGNED_LONG_LONG, lambda g: int(g.energy_mj)),
    94: ("nvmlDeviceGetPcieReplayCounter", VALUE_TYPE_UNSIGNED_INT, lambda g: g.pcie_replay),
    3: ("nvmlDeviceGetTotalEccErrors", VALUE_TYPE_UNSIGNED_LONG_LONG, lambda g: g.ecc_corrected),
    4: ("nvmlDeviceGetTotalEccErrors", VALUE_TYPE_UNSIGNED_LONG_LONG, lambda g: g.ecc_uncorrected),
}
#: Per-link NVLink error counter fields: counter type (NVLINK_COUNTERS order) -> field id of each link 0-11.
_NVLINK_FIELDS: dict[int, tuple[int, ...]] = {
    0: (46, 47, 48, 49, 50, 51, 108, 109, 110, 111, 112, 113),  # DL_REPLAY
    1: (53, 54, 55, 56, 57, 58, 114, 115, 116, 117, 118, 119),  # DL_RECOVERY
    2: (32, 33, 34, 35, 36, 37, 96, 97, 98, 99, 100, 101),  # DL_CRC_FLIT
    3: (39, 40, 41, 42, 43, 44, 102, 103, 104, 105, 106, 107),  # DL_CRC_DATA
}
_NVLINK_FIELD_AT = {fid: (link, kind) for kind, ids in _NVLINK_FIELDS.items() for link, fid in enumerate(ids)}

#: Device handles are these plus the GPU index; event sets these plus a serial number.
_HANDLE_BASE = 0x1000
_EVENT_SET_BASE = 0x50000
_NO_INSTANCE = 0xFFFFFFFF
#: NVML_VALUE_NOT_AVAILABLE for an unsigned long long (usedGpuMemory unknown).
_NOT_AVAILABLE_ULL = 0xFFFFFFFFFFFFFFFF

_ERROR_TEXT = {
    ERROR_NOT_FOUND: b"Not Found",
    ERROR_TIMEOUT: b"Timeout",
}


def _set(out: Any, value: Any) -> None:
    """Write through a ``byref()`` out-parameter."""
    out._obj.value = value


def _int(arg: Any) -> int:
    """A by-value argument: a ctypes scalar or a plain int."""
    return int(arg.value) if hasattr(arg, "value") else int(arg)


def _handle_value(handle: Any) -> int:
    return int(ctypes.cast(handle, ctypes.c_void_p).value or 0)


def _write_handle(out: Any, value: int) -> None:
    target = out._obj
    ctypes.c_void_p.from_address(ctypes.addressof(target)).value = value


GpuFn = Callable[[FakeGpu], int]


class FakeNvmlLibrary:
    """The process-wide fake ``libnvidia-ml``: plain-function symbols dispatching per target."""

    def __init__(self) -> None:
        self._machines: dict[str | None, FakeNvmlMachine] = {}
        self._lock = threading.Lock()
        self._previous_lib: Any = None
        self._installed = False
        self._next_set = 0
        # Deferred: the control symbols (clock and power writes) use this class's plumbing.
        from rigmon.sim.nvml_control import control_symbols

        self.symbols = types.SimpleNamespace(**self._build_symbols(), **control_symbols(self))

    # -- binding ----------------------------------------------------------------------

    def serve(self, target: str | os.PathLike[str] | None, machine: FakeNvmlMachine) -> None:
        """Answer NVML calls bound to ``target`` (a node's root) from ``machine``; installs the library."""
        key = None if target is None else os.path.abspath(target)
        with self._lock:
            self._machines[key] = machine
            if not self._installed:
                self._previous_lib = bind_library(self.symbols)
                self._installed = True

    def withdraw(self, target: str | os.PathLike[str] | None) -> None:
        """Stop serving ``target``; the last withdrawal puts the previous library back."""
        key = None if target is None else os.path.abspath(target)
        with self._lock:
            self._machines.pop(key, None)
            if self._installed and not self._machines:
                bind_library(self._previous_lib)
                self._installed = False

    def machine(self) -> FakeNvmlMachine | None:
        """The machine the current call is for (see `rigmon.hw.nvml.current_target`)."""
        target = current_target()
        with self._lock:
            return self._machines.get(target)

    # -- symbol plumbing --------------------------------------------------------------

    def _system(self, name: str, fn: Callable[[FakeNvmlMachine], int]) -> int:
        machine = self.machine()
        if machine is None:
            return ERROR_DRIVER_NOT_LOADED
        machine.wait_running(name)
        with machine.lock:
            machine.calls[name] += 1
            if machine.driver_missing:
                return ERROR_DRIVER_NOT_LOADED
            if name in machine.missing_symbols:
                return ERROR_FUNCTION_NOT_FOUND
            if machine.init_count <= 0 and name != "nvmlInitWithFlags":
                return ERROR_UNINITIALIZED
            return fn(machine)

    def _device(self, name: str, handle: Any, fn: GpuFn) -> int:
        def on_machine(machine: FakeNvmlMachine) -> int:
            index = _handle_value(handle) - _HANDLE_BASE
            if not 0 <= index < len(machine.gpus):
                return ERROR_INVALID_ARGUMENT
            gpu = machine.gpus[index]
            if gpu.lost:
                return ERROR_GPU_IS_LOST
            if name in gpu.not_supported:
                return ERROR_NOT_SUPPORTED
            return fn(gpu)

        return self._system(name, on_machine)

    def _scalar(self, name: str, getter: Callable[[FakeGpu], int | None]) -> Callable[[Any, Any], int]:
        def symbol(handle: Any, out: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                value = getter(gpu)
                if value is None:
                    return ERROR_NOT_SUPPORTED
                _set(out, value)
                return SUCCESS

            return self._device(name, handle, fill)

        return symbol

    def _string(self, name: str, getter: Callable[[FakeGpu], str]) -> Callable[[Any, Any, Any], int]:
        def symbol(handle: Any, buf: Any, length: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                buf.value = getter(gpu).encode()[: _int(length) - 1]
                return SUCCESS

            return self._device(name, handle, fill)

        return symbol

    def _clock(self, name: str, table: Callable[[FakeGpu], dict[int, int]]) -> Callable[[Any, Any, Any], int]:
        def symbol(handle: Any, clock_type: Any, out: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                value = table(gpu).get(_int(clock_type))
                if value is None:
                    return ERROR_NOT_SUPPORTED
                _set(out, value)
                return SUCCESS

            return self._device(name, handle, fill)

        return symbol

    # -- the symbols ------------------------------------------------------------------

    def _build_symbols(self) -> dict[str, Callable[..., Any]]:
        s: dict[str, Callable[..., Any]] = {}

        def init(flags: Any) -> int:
            def on(machine: FakeNvmlMachine) -> int:
                machine.init_count += 1
                return SUCCESS

            return self._system("nvmlInitWithFlags", on)

        def shutdown() -> int:
            machine = self.machine()
            if machine is not None:
                with machine.lock:
                    machine.init_count = max(0, machine.init_count - 1)
            return SUCCESS

        def error_string(code: Any) -> bytes:
            return _ERROR_TEXT.get(_int(code), b"Fake NVML error")

        def driver_version(buf: Any, length: Any) -> int:
            def on(machine: FakeNvmlMachine) -> int:
                buf.value = machine.driver_version.encode()
                return SUCCESS

            return self._system("nvmlSystemGetDriverVersion", on)

        def count(out: Any) -> int:
            def on(machine: FakeNvmlMachine) -> int:
                _set(out, len(machine.gpus))
                return SUCCESS

            return self._system("nvmlDeviceGetCount_v2", on)

        def handle_by_index(index: Any, out: Any) -> int:
            def on(machine: FakeNvmlMachine) -> int:
                i = _int(index)
                if not 0 <= i < len(machine.gpus):
                    return ERROR_INVALID_ARGUMENT
                if machine.gpus[i].lost:
                    return ERROR_GPU_IS_LOST
                _write_handle(out, _HANDLE_BASE + i)
                return SUCCESS

            return self._system("nvmlDeviceGetHandleByIndex_v2", on)

        def pci_info(handle: Any, out: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                info = out._obj
                info.busIdLegacy = f"{gpu.domain:04X}:{gpu.bus:02X}:00.0".encode()
                info.domain = gpu.domain
                info.bus = gpu.bus
                info.device = 0
                info.pciDeviceId = V100_DEVICE_ID
                info.pciSubSystemId = V100_SUBSYSTEM_ID
                info.busId = gpu.bus_id.encode()
                return SUCCESS

            return self._device("nvmlDeviceGetPciInfo_v3", handle, fill)

        def samples(handle: Any, kind: Any, since: Any, value_type: Any, count_out: Any, buf: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                if _int(kind) != TOTAL_POWER_SAMPLES:
                    return ERROR_NOT_SUPPORTED
                after = _int(since)
                newer = [smp for smp in gpu.power_samples if smp[0] > after]
                if not newer:
                    return ERROR_NOT_FOUND
                _set(value_type, VALUE_TYPE_UNSIGNED_INT)
                if buf is None:
                    _set(count_out, len(newer))
                    return SUCCESS
                room = count_out._obj.value
                for i, (ts_us, mw) in enumerate(newer[:room]):
                    buf[i].timeStamp = ts_us
                    buf[i].sampleValue.uiVal = mw
                _set(count_out, min(room, len(newer)))
                return SUCCESS

            return self._device("nvmlDeviceGetSamples", handle, fill)

        def field_values(handle: Any, n: Any, values: Any) -> int:
            # A field mirroring a function answers from the same GPU state, and NOT_SUPPORTED
            # where that function would (the GPU's not_supported names, a driver lacking it).
            def fill(gpu: FakeGpu) -> int:
                machine = self.machine()
                missing = machine.missing_symbols if machine is not None else set()
                array = values._obj
                filled = False
                for i in range(_int(n)):
                    value = array[i]
                    fid = int(value.fieldId)
                    answer: tuple[int, int] | None = None
                    if fid == FI_DEV_POWER_INSTANT and gpu.power_instant_supported:
                        answer = (VALUE_TYPE_UNSIGNED_INT, gpu.power_mw)
                    elif fid == FI_DEV_NVLINK_LINK_COUNT and gpu.nvlink_count_field:
                        answer = (VALUE_TYPE_UNSIGNED_INT, len(gpu.nvlink_active))
                    elif fid == FI_DEV_NVLINK_GET_STATE:
                        # As nvmlDeviceGetNvLinkState answers for that link (scopeId), on drivers
                        # that know the field (those that know the link count).
                        link = int(value.scopeId)
                        symbol = "nvmlDeviceGetNvLinkState"
                        if not gpu.nvlink_count_field or symbol in gpu.not_supported or symbol in missing:
                            pass
                        elif link < len(gpu.nvlink_active):
                            answer = (VALUE_TYPE_UNSIGNED_INT, 1 if gpu.nvlink_active[link] else 0)
                        else:
                            value.nvmlReturn = ERROR_INVALID_ARGUMENT
                            continue
                    elif fid in _FIELDS:
                        symbol, kind, getter = _FIELDS[fid]
                        if symbol not in gpu.not_supported and symbol not in missing:
                            answer = (kind, getter(gpu))
                    elif fid in _NVLINK_FIELD_AT:
                        link, counter = _NVLINK_FIELD_AT[fid]
                        symbol = "nvmlDeviceGetNvLinkErrorCounter"
                        if (link < len(gpu.nvlink_active) and symbol not in gpu.not_supported
                                and symbol not in missing):
                            answer = (VALUE_TYPE_UNSIGNED_LONG_LONG, gpu.nvlink_counters.get((link, counter), 0))
                    if answer is None:
                        value.nvmlReturn = ERROR_NOT_SUPPORTED
                        continue
                    value.valueType = answer[0]
                    if answer[0] == VALUE_TYPE_UNSIGNED_LONG_LONG:
                        value.value.ullVal = answer[1]
                    else:
                        value.value.uiVal = answer[1]
                    value.nvmlReturn = SUCCESS
                    filled = True
                return SUCCESS if filled else ERROR_NOT_SUPPORTED

            return self._device("nvmlDeviceGetFieldValues", handle, fill)

        def limit_constraints(handle: Any, low: Any, high: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                _set(low, 150_000)
                _set(high, gpu.default_limit_mw)
                return SUCCESS

            return self._device("nvmlDeviceGetPowerManagementLimitConstraints", handle, fill)

        def violation(handle: Any, policy: Any, out: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                p = _int(policy)
                if p not in (PERF_POLICY_POWER, PERF_POLICY_THERMAL):
                    return ERROR_NOT_SUPPORTED
                out._obj.referenceTime = 0
                out._obj.violationTime = gpu.violation_power_ns if p == 0 else gpu.violation_thermal_ns
                return SUCCESS

            return self._device("nvmlDeviceGetViolationStatus", handle, fill)

        def temperature(handle: Any, sensor: Any, out: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                if _int(sensor) != TEMPERATURE_GPU:
                    return ERROR_NOT_SUPPORTED
                _set(out, gpu.temp_c)
                return SUCCESS

            return self._device("nvmlDeviceGetTemperature", handle, fill)

        def utilization(handle: Any, out: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                out._obj.gpu = gpu.util_gpu_pct
                out._obj.memory = gpu.util_mem_pct
                return SUCCESS

            return self._device("nvmlDeviceGetUtilizationRates", handle, fill)

        def memory(handle: Any, out: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                out._obj.total = gpu.mem_total_bytes
                out._obj.used = gpu.mem_used_bytes
                out._obj.free = gpu.mem_total_bytes - gpu.mem_used_bytes
                return SUCCESS

            return self._device("nvmlDeviceGetMemoryInfo", handle, fill)

        def nvlink_state(handle: Any, link: Any, out: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                i = _int(link)
                if len(gpu.nvlink_active) <= i < (gpu.nvlink_state_indices or 0):
                    _set(out, 0)  # a driver that answers every index: "disabled" past the real links
                    return SUCCESS
                if not 0 <= i < len(gpu.nvlink_active):
                    return ERROR_INVALID_ARGUMENT
                _set(out, 1 if gpu.nvlink_active[i] else 0)
                return SUCCESS

            return self._device("nvmlDeviceGetNvLinkState", handle, fill)

        def nvlink_version(handle: Any, link: Any, out: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                if not 0 <= _int(link) < len(gpu.nvlink_active):
                    return ERROR_INVALID_ARGUMENT
                _set(out, 2)
                return SUCCESS

            return self._device("nvmlDeviceGetNvLinkVersion", handle, fill)

        def nvlink_counter(handle: Any, link: Any, counter: Any, out: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                i, c = _int(link), _int(counter)
                if not 0 <= i < len(gpu.nvlink_active):
                    return ERROR_INVALID_ARGUMENT
                if c not in NVLINK_COUNTERS:
                    return ERROR_NOT_SUPPORTED  # DL_ECC_DATA is Ampere+
                _set(out, gpu.nvlink_counters.get((i, c), 0))
                return SUCCESS

            return self._device("nvmlDeviceGetNvLinkErrorCounter", handle, fill)

        def ecc(handle: Any, error_type: Any, counter_type: Any, out: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                kind = _int(error_type)
                _set(out, gpu.ecc_corrected if kind == MEMORY_ERROR_TYPE_CORRECTED else gpu.ecc_uncorrected)
                return SUCCESS

            return self._device("nvmlDeviceGetTotalEccErrors", handle, fill)

        def running(name: str, kind: str) -> Callable[[Any, Any, Any], int]:
            # C: nvmlDeviceGet*RunningProcesses_v3(device, &count, infos): with too small a
            # buffer (pynvml first passes none) it sets count and answers INSUFFICIENT_SIZE.
            def symbol(handle: Any, count_out: Any, infos: Any) -> int:
                def fill(gpu: FakeGpu) -> int:
                    procs = [p for p in gpu.processes if p.kind == kind]
                    room = count_out._obj.value
                    _set(count_out, len(procs))
                    if not procs:
                        return SUCCESS
                    if infos is None or room < len(procs):
                        return ERROR_INSUFFICIENT_SIZE
                    for i, proc in enumerate(procs):
                        infos[i].pid = proc.pid
                        infos[i].usedGpuMemory = _NOT_AVAILABLE_ULL if proc.used_bytes is None else proc.used_bytes
                        infos[i].gpuInstanceId = _NO_INSTANCE
                        infos[i].computeInstanceId = _NO_INSTANCE
                    return SUCCESS

                return self._device(name, handle, fill)

            return symbol

        def process_utilization(handle: Any, buf: Any, count_out: Any, since: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                if gpu.process_sample_us <= _int(since) or not gpu.processes:
                    return ERROR_NOT_FOUND
                if buf is None:
                    _set(count_out, len(gpu.processes))
                    return ERROR_INSUFFICIENT_SIZE
                room = count_out._obj.value
                for i, proc in enumerate(gpu.processes[:room]):
                    buf[i].pid = proc.pid
                    buf[i].timeStamp = gpu.process_sample_us
                    buf[i].smUtil = proc.sm_pct
                    buf[i].memUtil = proc.mem_pct
                    buf[i].encUtil = 0
                    buf[i].decUtil = 0
                _set(count_out, min(room, len(gpu.processes)))
                return SUCCESS

            return self._device("nvmlDeviceGetProcessUtilization", handle, fill)

        def event_set_create(out: Any) -> int:
            def on(machine: FakeNvmlMachine) -> int:
                with self._lock:
                    self._next_set += 1
                    _write_handle(out, _EVENT_SET_BASE + self._next_set)
                return SUCCESS

            return self._system("nvmlEventSetCreate", on)

        def register_events(handle: Any, event_types: Any, event_set: Any) -> int:
            set_id = _handle_value(event_set)

            def fill(gpu: FakeGpu) -> int:
                machine = self.machine()
                assert machine is not None
                if _int(event_types) & 0x8:
                    machine._register(set_id, gpu.index)
                return SUCCESS

            return self._device("nvmlDeviceRegisterEvents", handle, fill)

        def event_wait(event_set: Any, data: Any, timeout_ms: Any) -> int:
            machine = self.machine()
            if machine is None:
                return ERROR_DRIVER_NOT_LOADED
            machine.wait_running("nvmlEventSetWait_v2")
            hit = machine._wait_event(_handle_value(event_set), _int(timeout_ms) / 1000.0)
            if hit is None:
                return ERROR_TIMEOUT
            index, xid = hit
            out = data._obj
            ctypes.c_void_p.from_address(ctypes.addressof(out) + type(out).device.offset).value = _HANDLE_BASE + index
            out.eventType = 0x8
            out.eventData = xid
            out.gpuInstanceId = _NO_INSTANCE
            out.computeInstanceId = _NO_INSTANCE
            return SUCCESS

        def event_set_free(event_set: Any) -> int:
            machine = self.machine()
            if machine is not None:
                with machine.lock:
                    machine._free(_handle_value(event_set))
            return SUCCESS

        s["nvmlInitWithFlags"] = init
        s["nvmlShutdown"] = shutdown
        s["nvmlErrorString"] = error_string
        s["nvmlSystemGetDriverVersion"] = driver_version
        s["nvmlDeviceGetCount_v2"] = count
        s["nvmlDeviceGetHandleByIndex_v2"] = handle_by_index
        s["nvmlDeviceGetPciInfo_v3"] = pci_info
        s["nvmlDeviceGetName"] = self._string("nvmlDeviceGetName", lambda g: g.name)
        s["nvmlDeviceGetUUID"] = self._string("nvmlDeviceGetUUID", lambda g: g.uuid)
        s["nvmlDeviceGetSerial"] = self._string("nvmlDeviceGetSerial", lambda g: g.serial)
        s["nvmlDeviceGetIndex"] = self._scalar("nvmlDeviceGetIndex", lambda g: g.index)
        s["nvmlDeviceGetPowerUsage"] = self._scalar("nvmlDeviceGetPowerUsage", lambda g: g.power_mw)
        s["nvmlDeviceGetSamples"] = samples
        s["nvmlDeviceGetFieldValues"] = field_values
        s["nvmlDeviceGetTotalEnergyConsumption"] = self._scalar(
            "nvmlDeviceGetTotalEnergyConsumption", lambda g: int(g.energy_mj))
        s["nvmlDeviceGetPowerManagementLimit"] = self._scalar(
            "nvmlDeviceGetPowerManagementLimit", lambda g: g.power_limit_mw)
        s["nvmlDeviceGetEnforcedPowerLimit"] = self._scalar(
            "nvmlDeviceGetEnforcedPowerLimit", lambda g: g.enforced_limit_mw)
        s["nvmlDeviceGetPowerManagementDefaultLimit"] = self._scalar(
            "nvmlDeviceGetPowerManagementDefaultLimit", lambda g: g.default_limit_mw)
        s["nvmlDeviceGetPowerManagementLimitConstraints"] = limit_constraints
        s["nvmlDeviceGetClockInfo"] = self._clock("nvmlDeviceGetClockInfo", lambda g: {
            0: g.clock_graphics_mhz, 1: g.clock_sm_mhz, 2: g.clock_mem_mhz})
        s["nvmlDeviceGetMaxClockInfo"] = self._clock("nvmlDeviceGetMaxClockInfo", lambda g: {
            0: g.max_clock_graphics_mhz, 1: g.max_clock_sm_mhz, 2: g.max_clock_mem_mhz, 3: 1372})
        s["nvmlDeviceGetApplicationsClock"] = self._clock("nvmlDeviceGetApplicationsClock", lambda g: {
            0: g.app_clock_graphics_mhz, 1: g.app_clock_graphics_mhz, 2: g.app_clock_mem_mhz})
        s["nvmlDeviceGetDefaultApplicationsClock"] = self._clock("nvmlDeviceGetDefaultApplicationsClock", lambda g: {
            0: 1312, 1: 1312, 2: 877})
        s["nvmlDeviceGetCurrentClocksEventReasons"] = self._scalar(
            "nvmlDeviceGetCurrentClocksEventReasons", lambda g: g.clock_reasons)
        s["nvmlDeviceGetCurrentClocksThrottleReasons"] = self._scalar(
            "nvmlDeviceGetCurrentClocksThrottleReasons", lambda g: g.clock_reasons)
        s["nvmlDeviceGetSupportedClocksThrottleReasons"] = self._scalar(
            "nvmlDeviceGetSupportedClocksThrottleReasons", lambda g: 0x1FF)
        s["nvmlDeviceGetViolationStatus"] = violation
        s["nvmlDeviceGetTemperature"] = temperature
        s["nvmlDeviceGetFanSpeed"] = self._scalar("nvmlDeviceGetFanSpeed", lambda g: g.fan_pct)
        s["nvmlDeviceGetUtilizationRates"] = utilization
        s["nvmlDeviceGetMemoryInfo"] = memory
        s["nvmlDeviceGetPerformanceState"] = self._scalar("nvmlDeviceGetPerformanceState", lambda g: g.pstate)
        s["nvmlDeviceGetCurrPcieLinkGeneration"] = self._scalar(
            "nvmlDeviceGetCurrPcieLinkGeneration", lambda g: g.pcie_gen)
        s["nvmlDeviceGetCurrPcieLinkWidth"] = self._scalar("nvmlDeviceGetCurrPcieLinkWidth", lambda g: g.pcie_width)
        s["nvmlDeviceGetMaxPcieLinkGeneration"] = self._scalar(
            "nvmlDeviceGetMaxPcieLinkGeneration", lambda g: g.pcie_gen_max)
        s["nvmlDeviceGetMaxPcieLinkWidth"] = self._scalar(
            "nvmlDeviceGetMaxPcieLinkWidth", lambda g: g.pcie_width_max)
        s["nvmlDeviceGetPcieReplayCounter"] = self._scalar("nvmlDeviceGetPcieReplayCounter", lambda g: g.pcie_replay)
        s["nvmlDeviceGetNvLinkState"] = nvlink_state
        s["nvmlDeviceGetNvLinkVersion"] = nvlink_version
        s["nvmlDeviceGetNvLinkErrorCounter"] = nvlink_counter
        s["nvmlDeviceGetTotalEccErrors"] = ecc
        s["nvmlDeviceGetSupportedEventTypes"] = self._scalar(
            "nvmlDeviceGetSupportedEventTypes", lambda g: 0x1 | 0x2 | 0x4 | 0x8 | 0x10)
        s["nvmlDeviceGetComputeRunningProcesses_v3"] = running("nvmlDeviceGetComputeRunningProcesses_v3", "compute")
        s["nvmlDeviceGetGraphicsRunningProcesses_v3"] = running("nvmlDeviceGetGraphicsRunningProcesses_v3", "graphics")
        s["nvmlDeviceGetProcessUtilization"] = process_utilization
        s["nvmlEventSetCreate"] = event_set_create
        s["nvmlDeviceRegisterEvents"] = register_events
        s["nvmlEventSetWait_v2"] = event_wait
        s["nvmlEventSetFree"] = event_set_free
        return s


#: The one fake library of this process (pynvml has one library slot).
FAKE_NVML = FakeNvmlLibrary()


@contextlib.contextmanager
def serving(target: str | os.PathLike[str] | None, machine: FakeNvmlMachine) -> Iterator[FakeNvmlMachine]:
    """Serve ``machine`` for ``target`` (a root, or ``None`` for direct pynvml calls) within a block.

    On exit the machine is withdrawn and any ``hang`` is healed, so no thread stays blocked.
    """
    FAKE_NVML.serve(target, machine)
    try:
        yield machine
    finally:
        machine.heal("hang")
        FAKE_NVML.withdraw(target)
