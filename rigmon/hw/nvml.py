"""NVML access: lazy init, one error gate per field, and a watchdog around every call.

This is the only module that imports ``pynvml`` (nvidia-ml-py). Collectors get an `Nvml`
from `open_nvml`, which returns plain frozen dataclasses of raw NVML values (milliwatts,
millijoules, bitmasks) with ``None`` for every value the GPU or driver does not give.

Binding (how one process serves several machines). pynvml keeps one global library
object, ``pynvml.nvmlLib``. On a real node that is ``libnvidia-ml.so.1`` and there is one
machine. The simulator runs many nodes' agents in one process and installs a single fake
library beneath pynvml that holds every simulated node's GPUs. To know which node a call
is for, every `PynvmlNvml` is bound to a *target*: the absolute path of the root its
agent reads (``open_nvml(ctx.root)``). Each call runs in the binding's own watchdog
thread (the Xid event wait: in the thread that waits) with the context variable behind
`current_target` set to that target; the real driver ignores it, and the fake library reads it
to pick the node's GPUs. Handles and
event sets therefore never need to encode the node, and pynvml's own wrappers, structures
and error classes run unchanged.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import ctypes
import dataclasses
import os
import struct
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import pynvml

from rigmon.hw.root import HostRoot

T = TypeVar("T")

#: Sampling type of the driver's power sample buffer (values in mW).
TOTAL_POWER_SAMPLES = pynvml.NVML_TOTAL_POWER_SAMPLES
#: Field id of the instantaneous power reading (mW); newer drivers only.
FI_POWER_INSTANT = 186
#: Highest NVLink index probed when the driver does not say how many links a GPU has.
MAX_NVLINKS = 18
#: Field id of a GPU's NVLink link count (NVML_FI_DEV_NVLINK_LINK_COUNT; V100-SXM2: 6).
FI_NVLINK_LINK_COUNT = 91
#: Xid critical error event type bit.
EVENT_XID = 0x8
#: Field ids read in one nvmlDeviceGetFieldValues call per GPU per poll (nvml.h NVML_FI_DEV_*):
#: total energy (mJ), PCIe replay counter, volatile ECC single/double-bit totals.
FI_ENERGY = 83
FI_PCIE_REPLAY = 94
FI_ECC_SBE_VOLATILE = 3
FI_ECC_DBE_VOLATILE = 4
#: Per-link NVLink error counter fields, links 0-5 then 6-11, by counter (nvml.h
#: NVML_FI_DEV_NVLINK_{REPLAY,RECOVERY,CRC_FLIT,CRC_DATA}_ERROR_COUNT_L*). Links past 11 have none.
FI_NVLINK_REPLAY = (46, 47, 48, 49, 50, 51, 108, 109, 110, 111, 112, 113)
FI_NVLINK_RECOVERY = (53, 54, 55, 56, 57, 58, 114, 115, 116, 117, 118, 119)
FI_NVLINK_CRC_FLIT = (32, 33, 34, 35, 36, 37, 96, 97, 98, 99, 100, 101)
FI_NVLINK_CRC_DATA = (39, 40, 41, 42, 43, 44, 102, 103, 104, 105, 106, 107)
#: Polls between two reads of a GPU's facts (identity, PCI address, default limit, maximum clocks
#: and link, NVLink count): they do not change while the GPU stays on the bus; read again sooner
#: when the GPU cannot be reached or the device count changes.
FACTS_EVERY = 60

_TARGET: contextvars.ContextVar[str | None] = contextvars.ContextVar("rigmon_nvml_target", default=None)

# Error codes that mean "this machine has no usable NVIDIA driver": a quiet absence.
_ABSENT_CODES = {
    pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
    pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
    pynvml.NVML_ERROR_NO_PERMISSION,
    pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
}


def current_target() -> str | None:
    """The root whose GPUs the NVML call in progress is for (see the module docstring).

    ``None`` outside a `PynvmlNvml` call (a test calling pynvml directly).
    """
    return _TARGET.get()


class NvmlUnavailable(Exception):
    """No NVIDIA driver, library or GPU: the quiet "not present" state."""


class NvmlHung(Exception):
    """An NVML call did not return within the watchdog timeout (or one is still stuck)."""


@dataclass(frozen=True, slots=True)
class NvLinkData:
    """Raw NVLink values of one link (counters since driver load)."""

    link: int
    active: bool | None
    replay: int | None
    recovery: int | None
    crc_flit: int | None
    crc_data: int | None


@dataclass(frozen=True, slots=True)
class NvmlDeviceData:
    """Raw values of one GPU, NVML units (mW, mJ, MHz, ns, bytes); ``None`` when not given.

    ``lost`` is true when any call answered GPU_IS_LOST. ``power_samples`` are
    ``(timestamp_us, milliwatts)`` pairs newer than the timestamp asked for.
    """

    index: int
    lost: bool
    uuid: str | None = None
    name: str | None = None
    serial: str | None = None
    pci_bus_id: str | None = None
    power_mw: int | None = None
    power_samples: tuple[tuple[int, int], ...] = ()
    power_instant_mw: int | None = None
    energy_mj: int | None = None
    power_limit_mw: int | None = None
    enforced_limit_mw: int | None = None
    default_limit_mw: int | None = None
    clock_sm_mhz: int | None = None
    clock_mem_mhz: int | None = None
    clock_graphics_mhz: int | None = None
    app_clock_graphics_mhz: int | None = None
    app_clock_mem_mhz: int | None = None
    max_clock_sm_mhz: int | None = None
    max_clock_mem_mhz: int | None = None
    max_clock_graphics_mhz: int | None = None
    clock_reasons: int | None = None
    violation_power_ns: int | None = None
    violation_thermal_ns: int | None = None
    temp_c: int | None = None
    fan_pct: int | None = None
    util_gpu_pct: int | None = None
    util_mem_pct: int | None = None
    mem_total_bytes: int | None = None
    mem_used_bytes: int | None = None
    pstate: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    pcie_replay: int | None = None
    nvlinks: tuple[NvLinkData, ...] = ()
    ecc_corrected: int | None = None
    ecc_uncorrected: int | None = None


@dataclass(frozen=True, slots=True)
class NvmlXid:
    """An Xid critical error event: the GPU's index and identity, and the Xid number."""

    index: int | None
    uuid: str | None
    pci_bus_id: str | None
    xid: int


@dataclass(frozen=True, slots=True)
class NvmlProcess:
    """A process NVML lists on a GPU: host PID, used GPU memory (``None`` when the driver
    does not say) and the list it came from (``compute`` or ``graphics``)."""

    pid: int
    used_bytes: int | None
    kind: str


@dataclass(frozen=True, slots=True)
class NvmlProcessUtil:
    """One per-process utilisation sample: ``timestamp_us`` and SM / memory percent."""

    pid: int
    timestamp_us: int
    sm_pct: int | None
    mem_pct: int | None


@dataclass(frozen=True, slots=True)
class NvmlGpuProcesses:
    """The processes of one GPU. ``lost`` when the GPU answered GPU_IS_LOST; ``listed`` is
    false when neither process list could be read (the processes are then unknown, not none);
    ``utils`` are the driver's per-process samples newer than the timestamp asked for."""

    index: int
    uuid: str | None
    lost: bool
    listed: bool
    processes: tuple[NvmlProcess, ...] = ()
    utils: tuple[NvmlProcessUtil, ...] = ()


class Nvml(Protocol):
    """The NVML seam the GPU collector depends on."""

    def device_count(self) -> int:
        """Number of GPUs NVML enumerates.

        Raises:
            NvmlUnavailable: no driver or library.
            NvmlHung: the call did not return in time.
        """
        ...

    def read_device(self, index: int, samples_since_us: int) -> NvmlDeviceData:
        """Every reading of GPU ``index``; power samples newer than ``samples_since_us``.

        Raises:
            NvmlUnavailable: no driver or library.
            NvmlHung: the calls did not return in time.
        """
        ...

    def read_devices(self, samples_since_us: Mapping[int, int]) -> list[NvmlDeviceData]:
        """Every GPU's readings in one hand-off: the device count, then `read_device` for each index.

        Args:
            samples_since_us: per GPU index, the newest power sample timestamp already seen
                (missing: 0, every buffered sample).

        Raises:
            NvmlUnavailable: no driver or library.
            NvmlHung: the calls did not return in time.
        """
        ...

    def wait_xid(self, timeout_s: float) -> list[NvmlXid]:
        """Block the calling thread up to ``timeout_s`` for Xid critical error events; empty on timeout.

        A wait stuck in the driver blocks its caller for longer: call it from a thread of its own.

        Raises:
            NvmlUnavailable: no driver, or events are not supported.
            NvmlHung: (other bindings) the wait overran its timeout.
        """
        ...

    def close(self) -> None:
        """Free the event set and shut NVML down (skipped when a call is stuck)."""
        ...


class NvmlProcesses(Protocol):
    """The NVML seam of the GPU processes collector."""

    def device_count(self) -> int:
        """Number of GPUs NVML enumerates (see `Nvml.device_count`)."""
        ...

    def read_processes(self, index: int, utils_since_us: int) -> NvmlGpuProcesses:
        """Running compute and graphics processes of GPU ``index``, with utilisation samples.

        Raises:
            NvmlUnavailable: no driver or library.
            NvmlHung: the calls did not return in time.
        """
        ...

    def read_all_processes(self, utils_since_us: Mapping[int, int]) -> list[NvmlGpuProcesses]:
        """Every GPU's processes in one hand-off: the device count, then `read_processes` for each index.

        Args:
            utils_since_us: per GPU index, the newest utilisation sample already seen (missing: 0).

        Raises:
            NvmlUnavailable: no driver or library.
            NvmlHung: the calls did not return in time.
        """
        ...

    def close(self) -> None:
        """Shut NVML down."""
        ...


class Watchdog:
    """Runs calls in one dedicated thread and gives up waiting after a timeout.

    A call that overruns is left running (a thread stuck in the driver cannot be killed);
    until it returns, every further call fails at once with `NvmlHung` instead of
    queueing behind it. When it returns, the next call runs normally: the hang is over.

    Args:
        name: thread name suffix.
        target: value of `current_target` while the calls run.
    """

    def __init__(self, name: str, target: str | None) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"rigmon-nvml-{name}")
        self._target = target
        self._stuck: concurrent.futures.Future[Any] | None = None
        self._stuck_since = 0.0
        self._lock = threading.Lock()

    @property
    def stuck(self) -> bool:
        """Whether a call that overran is still running."""
        with self._lock:
            return self._stuck is not None and not self._stuck.done()

    def run(self, fn: Callable[[], T], timeout_s: float) -> T:
        """Run ``fn`` in the watchdog thread and return its result.

        Raises:
            NvmlHung: ``fn`` did not return within ``timeout_s``, or an earlier call is
                still stuck.
            Exception: whatever ``fn`` raised.
        """
        with self._lock:
            if self._stuck is not None:
                if not self._stuck.done():
                    waited_s = time.monotonic() - self._stuck_since
                    raise NvmlHung(f"an NVML call has not returned for {waited_s:.1f} s")
                self._stuck = None
            future = self._executor.submit(self._in_target, fn)
        try:
            return future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            with self._lock:
                self._stuck = future
                self._stuck_since = time.monotonic() - timeout_s
            raise NvmlHung(f"an NVML call did not return within {timeout_s:g} s") from None

    def _in_target(self, fn: Callable[[], T]) -> T:
        token = _TARGET.set(self._target)
        try:
            return fn()
        finally:
            _TARGET.reset(token)

    def close(self) -> None:
        """Stop the thread (abandoned if stuck)."""
        self._executor.shutdown(wait=False, cancel_futures=True)


class _Gate:
    """Maps per-field NVML errors to ``None`` and remembers whether the GPU is lost."""

    def __init__(self) -> None:
        self.lost = False

    def get(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call ``fn(*args)``; ``None`` for an NVML error, which the field cannot give.

        NOT_SUPPORTED (fans on SXM2), FUNCTION_NOT_FOUND (an older driver), NO_PERMISSION
        and GPU_IS_LOST all leave that one value missing; GPU_IS_LOST also marks the GPU
        lost. Errors meaning the whole library went away propagate.
        """
        try:
            return fn(*args)
        except pynvml.NVMLError as exc:
            if exc.value == pynvml.NVML_ERROR_GPU_IS_LOST:
                self.lost = True
            elif exc.value in (pynvml.NVML_ERROR_UNINITIALIZED, pynvml.NVML_ERROR_DRIVER_NOT_LOADED):
                raise NvmlUnavailable(str(exc)) from None
            return None

    def call(self, refused: set[object], key: object, name: str, *args: Any) -> bool:
        """Call the NVML function ``name`` directly (not through pynvml's wrapper) with ``args``,
        whose last ones are ``byref`` outputs; whether it answered (the outputs hold its values).

        The same error semantics as `get`, without an exception per refusal: NOT_SUPPORTED and
        FUNCTION_NOT_FOUND put ``key`` in ``refused``, and a refused key is not asked again.

        Raises:
            NvmlUnavailable: the library went away (uninitialised, driver not loaded).
        """
        if key in refused:
            return False
        fn = _symbol(name)
        if fn is None:
            refused.add(key)
            return False
        ret = fn(*args)
        if ret == pynvml.NVML_SUCCESS:
            return True
        if ret == pynvml.NVML_ERROR_GPU_IS_LOST:
            self.lost = True
        elif ret in _GONE_CODES:
            raise NvmlUnavailable(str(pynvml.NVMLError(ret)))
        elif ret in _REFUSED_CODES:
            refused.add(key)
        return False


@dataclass(slots=True)
class _Facts:
    """What a GPU answers the same on every poll, read every `FACTS_EVERY` polls.

    ``fields`` are the field ids asked in one call each poll; ``unsupported`` the ones the
    driver refused, which are read through their own functions instead until the next refresh.
    """

    uuid: str | None
    name: str | None
    serial: str | None
    pci_bus_id: str | None
    default_limit_mw: int | None
    max_clock_sm_mhz: int | None
    max_clock_mem_mhz: int | None
    max_clock_graphics_mhz: int | None
    pcie_gen_max: int | None
    pcie_width_max: int | None
    nvlink_count: int | None
    fields: tuple[int, ...]
    outputs: _Outputs
    unsupported: set[int] = dataclasses.field(default_factory=set)
    #: Per-poll functions (by name and argument) the driver refused, not asked until the next refresh.
    refused: set[object] = dataclasses.field(default_factory=set)
    polls_left: int = FACTS_EVERY


#: ``c_nvmlValue_t`` member for each integer value type.
_VALUE_MEMBER = {
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal",
}


def _field_value(value: Any) -> int | None:
    """The integer in one ``c_nvmlFieldValue_t``, by its value type; ``None`` for a double or an unknown type."""
    member = _VALUE_MEMBER.get(int(value.valueType))
    return None if member is None else int(getattr(value.value, member))


def _mhz(value: Any) -> int | None:
    # Some drivers answer 0 for a clock domain they do not report; 0 MHz is never real.
    return int(value) if isinstance(value, int) and value > 0 else None


def _pct(value: Any) -> int | None:
    # The driver fills samples it has no value for with NVML_VALUE_NOT_AVAILABLE (all ones).
    return int(value) if isinstance(value, int) and 0 <= value <= 100 else None


# The poll's outputs are plain ctypes structures with the layout (and member names) of pynvml's:
# pynvml's own are `_PrintableStructure`s whose every attribute read and write goes through a
# Python __getattribute__/__setattr__ (bytes-to-str conversion), a third of a GPU read's cost
# when 29 field values are decoded per GPU per poll.
class _FieldValue(ctypes.Structure):
    _fields_ = pynvml.c_nvmlFieldValue_t._fields_


class _Sample(ctypes.Structure):
    _fields_ = pynvml.c_nvmlSample_t._fields_


class _Memory(ctypes.Structure):
    _fields_ = pynvml.c_nvmlMemory_t._fields_


class _Utilization(ctypes.Structure):
    _fields_ = pynvml.c_nvmlUtilization_t._fields_


class _Violation(ctypes.Structure):
    _fields_ = pynvml.c_nvmlViolationTime_t._fields_


#: NVML answers that mean "this function gives nothing on this GPU or driver": remembered, not
#: asked again until the GPU's facts are read again (a fan on an SXM2 board answers NOT_SUPPORTED
#: on every poll, and raising and catching pynvml's exception for it cost more than the call).
_REFUSED_CODES = frozenset({pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND})
_GONE_CODES = frozenset({pynvml.NVML_ERROR_UNINITIALIZED, pynvml.NVML_ERROR_DRIVER_NOT_LOADED})


class _Outputs:
    """One GPU's output buffers for the per-poll reads, allocated once (with its facts)."""

    __slots__ = ("uint", "uint_ref", "ulonglong", "ulonglong_ref", "memory", "memory_ref", "util", "util_ref",
                 "violation", "violation_ref", "field_ids", "fields", "fields_ref", "n_fields", "value_type",
                 "value_type_ref", "count", "count_ref")

    def __init__(self, field_ids: tuple[int, ...]) -> None:
        self.uint = ctypes.c_uint()
        self.uint_ref = ctypes.byref(self.uint)
        self.ulonglong = ctypes.c_ulonglong()
        self.ulonglong_ref = ctypes.byref(self.ulonglong)
        self.memory = _Memory()
        self.memory_ref = ctypes.byref(self.memory)
        self.util = _Utilization()
        self.util_ref = ctypes.byref(self.util)
        self.violation = _Violation()
        self.violation_ref = ctypes.byref(self.violation)
        self.value_type = ctypes.c_uint()
        self.value_type_ref = ctypes.byref(self.value_type)
        self.count = ctypes.c_uint()
        self.count_ref = ctypes.byref(self.count)
        self.set_fields(field_ids)

    def set_fields(self, field_ids: tuple[int, ...]) -> None:
        """Ask these fields in the field-values call from now on."""
        self.field_ids = field_ids
        self.fields = (_FieldValue * max(1, len(field_ids)))()
        for value, field_id in zip(self.fields, field_ids):
            value.fieldId = field_id
        self.fields_ref = ctypes.byref(self.fields)
        self.n_fields = ctypes.c_int32(len(field_ids))


#: ``c_nvmlFieldValue_t`` as bytes: valueType and nvmlReturn (after fieldId, scopeId, timestamp and
#: latencyUsec), then the 8-byte value union as an unsigned integer (native byte order).
_FIELD_LAYOUT = struct.Struct("=24xII Q")
assert _FIELD_LAYOUT.size == ctypes.sizeof(_FieldValue), "c_nvmlFieldValue_t changed its layout"
#: Bits of the union's unsigned 64-bit view each integer value type uses, and whether it is signed.
_UNION_INT = {
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: (0xFFFFFFFF, 0),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: (0xFFFFFFFFFFFFFFFF, 0),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: (0xFFFFFFFFFFFFFFFF, 0),
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: (0xFFFFFFFFFFFFFFFF, 1 << 63),
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: (0xFFFFFFFF, 1 << 31),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: (0xFFFF, 0),
}


def _union_int(value_type: int, raw: int) -> int | None:
    """The integer in a value union read as unsigned 64 bits; ``None`` for a double or an unknown type."""
    try:
        mask, sign = _UNION_INT[value_type]
    except KeyError:
        return None
    value = raw & mask
    return value - 2 * sign if sign and value & sign else value


def _symbol(name: str) -> Callable[..., int] | None:
    """The NVML function ``name`` as pynvml resolved it (its cache), ``None`` when the library lacks it."""
    try:
        fn: Callable[..., int] = pynvml._nvmlGetFunctionPointer(name)
    except pynvml.NVMLError:
        return None
    return fn


class PynvmlNvml:
    """`Nvml` over the real ``pynvml`` module, every call behind a watchdog.

    A poll (`read_devices`) is one hand-off to the watchdog thread for every GPU. Per GPU it
    reads the counters that NVML offers as fields (energy, PCIe replays, ECC, NVLink error
    counters) in one ``nvmlDeviceGetFieldValues`` call, falling back to each value's own
    function where the driver refuses a field, and it reads the GPU's facts (`_Facts`) only
    every `FACTS_EVERY` polls. Each part of a GPU's read is its own step in `_read`, so a
    further read (one more function per GPU) slots in there.

    Args:
        target: the binding (absolute root path); see the module docstring.
        timeout_s: watchdog timeout for one call, or per GPU for a poll of every GPU.
    """

    def __init__(self, target: str | None, timeout_s: float = 2.0) -> None:
        self.target = target
        self.timeout_s = timeout_s
        # Only the poll watchdog's thread touches these two.
        self._facts: dict[int, _Facts] = {}
        self._count_hint = 1
        self._poll = Watchdog("poll", target)
        #: Xid waits in progress (see `wait_xid`), and whether `close` has run.
        self._waiting = 0
        self._closed = False
        self._waiting_lock = threading.Lock()
        self._initialized = False
        # The poll watchdog's thread and the Xid thread both init on first use: one nvmlInit.
        self._init_lock = threading.Lock()
        self._event_set: Any = None
        self._event_handles: dict[int, tuple[int, str | None, str | None]] = {}

    def _ensure_init(self) -> None:
        """Lazy init, in the watchdog thread. A missing driver stays a quiet absence."""
        if self._initialized:
            return
        with self._init_lock:
            if self._initialized:
                return
            try:
                pynvml.nvmlInit()
            except pynvml.NVMLError as exc:
                if exc.value in _ABSENT_CODES:
                    raise NvmlUnavailable(f"NVML: {exc}") from None
                raise
            self._initialized = True

    def device_count(self) -> int:
        return self._poll.run(self._count, self.timeout_s)

    def _count(self) -> int:
        self._ensure_init()
        try:
            count = int(pynvml.nvmlDeviceGetCount())
        except pynvml.NVMLError as exc:
            if exc.value in _ABSENT_CODES or exc.value == pynvml.NVML_ERROR_UNINITIALIZED:
                raise NvmlUnavailable(f"NVML: {exc}") from None
            raise
        if max(1, count) != self._count_hint:
            # GPUs came or went: what was known by index may now be another GPU's.
            self._facts.clear()
            self._count_hint = max(1, count)
        return count

    def read_device(self, index: int, samples_since_us: int) -> NvmlDeviceData:
        return self._poll.run(lambda: self._read(index, samples_since_us), self.timeout_s)

    def read_devices(self, samples_since_us: Mapping[int, int]) -> list[NvmlDeviceData]:
        def call() -> list[NvmlDeviceData]:
            return [self._read(index, samples_since_us.get(index, 0)) for index in range(self._count())]

        return self._poll.run(call, self.timeout_s * self._count_hint)

    def _read(self, index: int, since_us: int) -> NvmlDeviceData:
        self._ensure_init()
        gate = _Gate()
        handle = gate.get(pynvml.nvmlDeviceGetHandleByIndex, index)
        if handle is None:
            self._facts.pop(index, None)
            return NvmlDeviceData(index=index, lost=gate.lost)
        g = gate.get
        facts = self._facts_of(gate, index, handle)
        fields = self._fields(gate, handle, facts)
        # The per-poll reads call NVML's functions directly into the GPU's buffers (see
        # `_Gate.call`): pynvml's wrappers allocate an output and resolve the function on every
        # call, and raise an exception for every refusal. Rare paths keep the wrappers.
        out, refused, call = facts.outputs, facts.refused, gate.call
        uint, uint_ref = out.uint, out.uint_ref

        def read_uint(key: object, name: str, *args: Any) -> int | None:
            return int(uint.value) if call(refused, key, name, handle, *args, uint_ref) else None

        def field_or(field_id: int, fn: Callable[..., Any], *args: Any) -> Any:
            return fields[field_id] if field_id in fields else g(fn, handle, *args)

        util_gpu = util_mem = None
        if call(refused, "util", "nvmlDeviceGetUtilizationRates", handle, out.util_ref):
            util_gpu, util_mem = int(out.util.gpu), int(out.util.memory)
        mem_total = mem_used = None
        if call(refused, "mem", "nvmlDeviceGetMemoryInfo", handle, out.memory_ref):
            mem_total, mem_used = int(out.memory.total), int(out.memory.used)
        reasons = None
        if call(refused, "reasons", "nvmlDeviceGetCurrentClocksEventReasons", handle, out.ulonglong_ref) or call(
                refused, "throttle", "nvmlDeviceGetCurrentClocksThrottleReasons", handle, out.ulonglong_ref):
            reasons = int(out.ulonglong.value)
        viol_power = viol_thermal = None
        if call(refused, "viol_power", "nvmlDeviceGetViolationStatus", handle, pynvml.NVML_PERF_POLICY_POWER,
                out.violation_ref):
            viol_power = int(out.violation.violationTime)
        if call(refused, "viol_thermal", "nvmlDeviceGetViolationStatus", handle, pynvml.NVML_PERF_POLICY_THERMAL,
                out.violation_ref):
            viol_thermal = int(out.violation.violationTime)
        data = NvmlDeviceData(
            index=index,
            lost=False,  # set below, after every call had its chance to say so
            uuid=facts.uuid,
            name=facts.name,
            serial=facts.serial,
            pci_bus_id=facts.pci_bus_id,
            power_mw=read_uint("power", "nvmlDeviceGetPowerUsage"),
            power_samples=self._power_samples(gate, handle, since_us, out),
            power_instant_mw=fields.get(FI_POWER_INSTANT),
            energy_mj=field_or(FI_ENERGY, pynvml.nvmlDeviceGetTotalEnergyConsumption),
            power_limit_mw=read_uint("limit", "nvmlDeviceGetPowerManagementLimit"),
            enforced_limit_mw=read_uint("enforced", "nvmlDeviceGetEnforcedPowerLimit"),
            default_limit_mw=facts.default_limit_mw,
            clock_sm_mhz=_mhz(read_uint("clock_sm", "nvmlDeviceGetClockInfo", pynvml.NVML_CLOCK_SM)),
            clock_mem_mhz=_mhz(read_uint("clock_mem", "nvmlDeviceGetClockInfo", pynvml.NVML_CLOCK_MEM)),
            clock_graphics_mhz=_mhz(read_uint("clock_gr", "nvmlDeviceGetClockInfo", pynvml.NVML_CLOCK_GRAPHICS)),
            app_clock_graphics_mhz=_mhz(read_uint("app_gr", "nvmlDeviceGetApplicationsClock",
                                                  pynvml.NVML_CLOCK_GRAPHICS)),
            app_clock_mem_mhz=_mhz(read_uint("app_mem", "nvmlDeviceGetApplicationsClock", pynvml.NVML_CLOCK_MEM)),
            max_clock_sm_mhz=facts.max_clock_sm_mhz,
            max_clock_mem_mhz=facts.max_clock_mem_mhz,
            max_clock_graphics_mhz=facts.max_clock_graphics_mhz,
            clock_reasons=reasons,
            violation_power_ns=viol_power,
            violation_thermal_ns=viol_thermal,
            temp_c=read_uint("temp", "nvmlDeviceGetTemperature", pynvml.NVML_TEMPERATURE_GPU),
            fan_pct=read_uint("fan", "nvmlDeviceGetFanSpeed"),
            util_gpu_pct=util_gpu,
            util_mem_pct=util_mem,
            mem_total_bytes=mem_total,
            mem_used_bytes=mem_used,
            pstate=read_uint("pstate", "nvmlDeviceGetPerformanceState"),
            pcie_gen=read_uint("pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration"),
            pcie_width=read_uint("pcie_width", "nvmlDeviceGetCurrPcieLinkWidth"),
            pcie_gen_max=facts.pcie_gen_max,
            pcie_width_max=facts.pcie_width_max,
            pcie_replay=field_or(FI_PCIE_REPLAY, pynvml.nvmlDeviceGetPcieReplayCounter),
            nvlinks=self._nvlinks(gate, handle, facts, fields),
            ecc_corrected=field_or(FI_ECC_SBE_VOLATILE, pynvml.nvmlDeviceGetTotalEccErrors,
                                   pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_VOLATILE_ECC),
            ecc_uncorrected=field_or(FI_ECC_DBE_VOLATILE, pynvml.nvmlDeviceGetTotalEccErrors,
                                     pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC),
        )
        if gate.lost:
            self._facts.pop(index, None)
            return dataclasses.replace(data, lost=True)
        return data

    def read_processes(self, index: int, utils_since_us: int) -> NvmlGpuProcesses:
        return self._poll.run(lambda: self._processes(index, utils_since_us), self.timeout_s)

    def read_all_processes(self, utils_since_us: Mapping[int, int]) -> list[NvmlGpuProcesses]:
        def call() -> list[NvmlGpuProcesses]:
            return [self._processes(index, utils_since_us.get(index, 0)) for index in range(self._count())]

        return self._poll.run(call, self.timeout_s * self._count_hint)

    def _processes(self, index: int, since_us: int) -> NvmlGpuProcesses:
        self._ensure_init()
        gate = _Gate()
        handle = gate.get(pynvml.nvmlDeviceGetHandleByIndex, index)
        if handle is None:
            return NvmlGpuProcesses(index=index, uuid=None, lost=gate.lost, listed=False)
        uuid = gate.get(pynvml.nvmlDeviceGetUUID, handle)
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
            utils = self._process_utils(gate, handle, since_us)
        return NvmlGpuProcesses(index=index, uuid=uuid, lost=gate.lost, listed=compute is not None or graphics is not None,
                                processes=tuple(procs.values()), utils=utils)

    @staticmethod
    def _process_utils(gate: _Gate, handle: Any, since_us: int) -> tuple[NvmlProcessUtil, ...]:
        try:
            samples = pynvml.nvmlDeviceGetProcessUtilization(handle, since_us)
        except pynvml.NVMLError as exc:
            # NOT_FOUND: no sample newer than that; NOT_SUPPORTED: pre-Maxwell or vGPU.
            if exc.value == pynvml.NVML_ERROR_GPU_IS_LOST:
                gate.lost = True
            return ()
        return tuple(NvmlProcessUtil(pid=int(s.pid), timestamp_us=int(s.timeStamp),
                                     sm_pct=_pct(s.smUtil), mem_pct=_pct(s.memUtil)) for s in samples)

    @staticmethod
    def _power_samples(gate: _Gate, handle: Any, since_us: int, out: _Outputs) -> tuple[tuple[int, int], ...]:
        """The driver's power samples (mW) newer than ``since_us``: NVML's two calls, count, then samples."""
        fn = _symbol("nvmlDeviceGetSamples")
        if fn is None:
            return ()
        since = ctypes.c_ulonglong(since_us)
        out.count.value = 0
        ret = fn(handle, TOTAL_POWER_SAMPLES, since, out.value_type_ref, out.count_ref, None)
        count = out.count.value if ret == pynvml.NVML_SUCCESS else 0
        if count:
            samples = (_Sample * count)()
            ret = fn(handle, TOTAL_POWER_SAMPLES, since, out.value_type_ref, out.count_ref, samples)
            count = min(count, out.count.value)
        if ret != pynvml.NVML_SUCCESS:
            # NOT_FOUND is the driver's way of saying "no samples newer than that".
            if ret == pynvml.NVML_ERROR_GPU_IS_LOST:
                gate.lost = True
            return ()
        if not count:
            return ()
        return tuple((int(s.timeStamp), int(s.sampleValue.uiVal)) for s in samples[:count])

    def _facts_of(self, gate: _Gate, index: int, handle: Any) -> _Facts:
        """The GPU's facts, read again every `FACTS_EVERY` polls (and after it was unreachable)."""
        facts = self._facts.get(index)
        if facts is not None and facts.polls_left > 0:
            facts.polls_left -= 1
            return facts
        g = gate.get
        pci = g(pynvml.nvmlDeviceGetPciInfo, handle)
        # Ask the driver how many links the GPU has: some drivers answer the state query for
        # every index up to NVML_NVLINK_MAX_LINKS ("disabled" past the real ones), which would
        # list 18 links on a V100-SXM2 with 6. Old drivers lack the field: probe until refused.
        count = self._field_uint(gate, handle, FI_NVLINK_LINK_COUNT)
        links = min(count or 0, len(FI_NVLINK_REPLAY))
        fields = (FI_POWER_INSTANT, FI_ENERGY, FI_PCIE_REPLAY, FI_ECC_SBE_VOLATILE, FI_ECC_DBE_VOLATILE,
                  *(table[link] for link in range(links)
                    for table in (FI_NVLINK_REPLAY, FI_NVLINK_RECOVERY, FI_NVLINK_CRC_FLIT, FI_NVLINK_CRC_DATA)))
        facts = _Facts(
            uuid=g(pynvml.nvmlDeviceGetUUID, handle),
            name=g(pynvml.nvmlDeviceGetName, handle),
            serial=g(pynvml.nvmlDeviceGetSerial, handle),
            pci_bus_id=None if pci is None else str(pci.busId),
            default_limit_mw=g(pynvml.nvmlDeviceGetPowerManagementDefaultLimit, handle),
            max_clock_sm_mhz=_mhz(g(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM)),
            max_clock_mem_mhz=_mhz(g(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_MEM)),
            max_clock_graphics_mhz=_mhz(g(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_GRAPHICS)),
            pcie_gen_max=g(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
            pcie_width_max=g(pynvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
            nvlink_count=count,
            fields=fields,
            outputs=_Outputs(fields),
        )
        if not gate.lost:
            self._facts[index] = facts
        return facts

    @staticmethod
    def _fields(gate: _Gate, handle: Any, facts: _Facts) -> dict[int, int]:
        """The poll's field values in one call: ``{field id: value}`` for the fields the driver filled.

        A field the driver refuses (the whole call, or that field's own status) joins
        ``facts.unsupported`` and is read through its own function until the facts are read again.
        """
        out = facts.outputs
        if facts.unsupported and any(f in facts.unsupported for f in out.field_ids):
            out.set_fields(tuple(f for f in facts.fields if f not in facts.unsupported))
        wanted = out.field_ids
        if not wanted:
            return {}
        fn = _symbol("nvmlDeviceGetFieldValues")
        ret = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND if fn is None else fn(handle, out.n_fields, out.fields_ref)
        if ret != pynvml.NVML_SUCCESS:
            if ret == pynvml.NVML_ERROR_GPU_IS_LOST:
                gate.lost = True
            elif ret in _GONE_CODES:
                raise NvmlUnavailable(str(pynvml.NVMLError(ret)))
            else:
                facts.unsupported.update(wanted)
            return {}
        got: dict[int, int] = {}
        # The call succeeds when any field was filled; each field carries its own status. The
        # array is decoded in one pass over its bytes (an attribute read per member was most of
        # the decoding), with the integer union member chosen by the value type.
        for field_id, (value_type, status, raw) in zip(wanted, _FIELD_LAYOUT.iter_unpack(bytes(out.fields)),
                                                       strict=True):
            number = _union_int(value_type, raw) if status == pynvml.NVML_SUCCESS else None
            if number is not None:
                got[field_id] = number
            elif status == pynvml.NVML_ERROR_GPU_IS_LOST:
                gate.lost = True
            else:
                facts.unsupported.add(field_id)
        return got

    @staticmethod
    def _field_uint(gate: _Gate, handle: Any, field_id: int) -> int | None:
        values = gate.get(pynvml.nvmlDeviceGetFieldValues, handle, [field_id])
        if values is None:
            return None
        # The call succeeds when any field was filled; each field carries its own status.
        value = values[0]
        if value.nvmlReturn != pynvml.NVML_SUCCESS:
            return None
        return _field_value(value)

    @staticmethod
    def _nvlinks(gate: _Gate, handle: Any, facts: _Facts, fields: dict[int, int]) -> tuple[NvLinkData, ...]:
        count = facts.nvlink_count
        links: list[NvLinkData] = []
        fn = _symbol("nvmlDeviceGetNvLinkState")
        out = facts.outputs
        for link in range(0 if fn is None else MAX_NVLINKS if count is None else count):
            assert fn is not None
            ret = fn(handle, link, out.uint_ref)
            if ret != pynvml.NVML_SUCCESS:
                # A GPU without NVLink answers NOT_SUPPORTED; past the last link the driver
                # answers INVALID_ARGUMENT (or NOT_SUPPORTED): either way, no more links.
                if ret == pynvml.NVML_ERROR_GPU_IS_LOST:
                    gate.lost = True
                elif ret in _GONE_CODES:
                    raise NvmlUnavailable(str(pynvml.NVMLError(ret)))
                break
            state = out.uint.value

            def counter(kind: int, table: tuple[int, ...], link: int = link) -> int | None:
                if link < len(table) and table[link] in fields:
                    return fields[table[link]]
                value = gate.get(pynvml.nvmlDeviceGetNvLinkErrorCounter, handle, link, kind)
                return None if value is None else int(value)

            links.append(NvLinkData(
                link=link,
                active=bool(state),
                replay=counter(pynvml.NVML_NVLINK_ERROR_DL_REPLAY, FI_NVLINK_REPLAY),
                recovery=counter(pynvml.NVML_NVLINK_ERROR_DL_RECOVERY, FI_NVLINK_RECOVERY),
                crc_flit=counter(pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT, FI_NVLINK_CRC_FLIT),
                crc_data=counter(pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA, FI_NVLINK_CRC_DATA),
            ))
        return tuple(links)

    def wait_xid(self, timeout_s: float) -> list[NvmlXid]:
        # The wait runs on the calling thread (the GPU collector's Xid thread, which does nothing
        # else), not behind a watchdog: a hand-off to another thread and back twice a second was
        # most of what the event threads cost, and a wait stuck in the driver blocks only that
        # thread, which nothing waits for (`close` leaves the event set alone while it waits).
        wait_ms = max(1, int(timeout_s * 1000))
        with self._waiting_lock:
            if self._closed:
                return []
            self._waiting += 1
        token = _TARGET.set(self.target)
        try:
            return self._wait(wait_ms)
        finally:
            _TARGET.reset(token)
            with self._waiting_lock:
                self._waiting -= 1

    def _register(self) -> None:
        self._ensure_init()
        event_set = pynvml.nvmlEventSetCreate()
        handles: dict[int, tuple[int, str | None, str | None]] = {}
        for index in range(int(pynvml.nvmlDeviceGetCount())):
            gate = _Gate()
            handle = gate.get(pynvml.nvmlDeviceGetHandleByIndex, index)
            if handle is None:
                continue
            supported = gate.get(pynvml.nvmlDeviceGetSupportedEventTypes, handle)
            if not supported or not supported & EVENT_XID:
                continue
            # NOT_SUPPORTED from registration leaves the set usable for the other GPUs.
            gate.get(pynvml.nvmlDeviceRegisterEvents, handle, EVENT_XID, event_set)
            pci = gate.get(pynvml.nvmlDeviceGetPciInfo, handle)
            handles[_handle_key(handle)] = (
                index, gate.get(pynvml.nvmlDeviceGetUUID, handle), None if pci is None else str(pci.busId)
            )
        if not handles:
            pynvml.nvmlEventSetFree(event_set)
            raise NvmlUnavailable("no GPU supports Xid events")
        self._event_set = event_set
        self._event_handles = handles

    def _wait(self, wait_ms: int) -> list[NvmlXid]:
        try:
            if self._event_set is None:
                self._register()
            data = pynvml.nvmlEventSetWait_v2(self._event_set, wait_ms)
        except pynvml.NVMLError as exc:
            if exc.value == pynvml.NVML_ERROR_TIMEOUT:
                return []
            if exc.value in _ABSENT_CODES or exc.value == pynvml.NVML_ERROR_NOT_SUPPORTED:
                raise NvmlUnavailable(f"NVML events: {exc}") from None
            raise
        if not data.eventType & EVENT_XID:
            return []
        index, uuid, bus_id = self._event_handles.get(_handle_key(data.device), (None, None, None))
        return [NvmlXid(index=index, uuid=uuid, pci_bus_id=bus_id, xid=int(data.eventData))]

    def close(self) -> None:
        with self._waiting_lock:
            self._closed = True
            waiting = self._waiting
        if not waiting and self._event_set is not None:
            # No Xid wait in progress (the collector joined its thread): free the set here. One
            # still waiting (stuck in the driver) keeps it, as a stuck call keeps its thread.
            event_set, self._event_set = self._event_set, None
            token = _TARGET.set(self.target)
            try:
                pynvml.nvmlEventSetFree(event_set)
            except pynvml.NVMLError:
                pass
            finally:
                _TARGET.reset(token)
        if self._poll.stuck:
            self._poll.close()
            return
        try:
            self._poll.run(self._shutdown, self.timeout_s)
        except (NvmlHung, pynvml.NVMLError):
            pass
        self._poll.close()

    def _shutdown(self) -> None:
        with self._init_lock:
            if self._initialized:
                self._initialized = False
                pynvml.nvmlShutdown()


def _handle_key(handle: Any) -> int:
    """A device handle's pointer value, to recognise it in event data."""
    return int(ctypes.cast(handle, ctypes.c_void_p).value or 0)


def bind_library(library: object | None) -> object | None:
    """Put ``library`` beneath pynvml as its loaded NVML library; return the one it replaces.

    For a library serving simulated machines (``rigmon.sim.nvml``): pynvml then calls its
    symbols instead of loading ``libnvidia-ml.so.1``. The function-pointer cache is
    cleared so no symbol of the previous library survives. ``None`` unloads, so the next
    init loads the real library again.
    """
    with pynvml.libLoadLock:
        previous: object | None = pynvml.nvmlLib
        pynvml.nvmlLib = library
        pynvml._nvmlGetFunctionPointer_cache.clear()
        pynvml._nvmlLib_refcount = 0
    return previous


def open_nvml(root: HostRoot, timeout_s: float = 2.0) -> Nvml:
    """The `Nvml` binding for the machine whose files are under ``root``.

    The binding's target is the root's absolute path; see the module docstring for how
    a library serving several simulated machines uses it.
    """
    return PynvmlNvml(target=os.path.abspath(root.root), timeout_s=timeout_s)


def open_nvml_processes(root: HostRoot, timeout_s: float = 2.0) -> NvmlProcesses:
    """The process-listing `NvmlProcesses` binding for the machine under ``root`` (see `open_nvml`)."""
    return PynvmlNvml(target=os.path.abspath(root.root), timeout_s=timeout_s)
