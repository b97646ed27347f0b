"""The fake NVIDIA driver's state: simulated GPUs in NVML units, named failures, pending Xid events.

This is the physics-facing side: simulated devices and scenarios set `FakeGpu` fields and
call `FakeNvmlMachine.fail`/`heal`/`post_xid`. What pynvml calls (the C symbol table) is
`rigmon.sim.nvml.FakeNvmlLibrary`, which reads these machines.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

FailureName = Literal["not_supported", "gpu_lost", "driver_missing", "hang"]

#: NVML keeps a bounded ring of power samples per GPU.
POWER_SAMPLE_BUFFER = 120
V100_MEMORY_BYTES = 16_945_512_448
V100_DEVICE_ID = 0x1DB110DE
V100_SUBSYSTEM_ID = 0x121210DE
NVLINK_COUNTERS = (0, 1, 2, 3)  # DL_REPLAY, DL_RECOVERY, DL_CRC_FLIT, DL_CRC_DATA
#: A V100-SXM2's default application clocks (memory, graphics) in MHz: what a reset or a
#: driver reload puts back (``nvmlDeviceGetDefaultApplicationsClock``).
DEFAULT_APP_CLOCKS = (877, 1312)
#: GPU memory an idle V100 shows used with no process on it (bytes).
IDLE_MEM_USED_BYTES = 524_288

#: Symbols whose value is optional on some part; ``not_supported`` without names covers these.
OPTIONAL_SYMBOLS = frozenset({
    "nvmlDeviceGetFanSpeed", "nvmlDeviceGetSerial", "nvmlDeviceGetSamples", "nvmlDeviceGetFieldValues",
    "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetViolationStatus", "nvmlDeviceGetApplicationsClock",
    "nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkErrorCounter", "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetPcieReplayCounter", "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlDeviceGetPowerManagementLimit",
    "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementDefaultLimit",
    "nvmlDeviceGetProcessUtilization",
})


#: `FakeNvmlMachine.wait_xid_event`'s answer when a lost GPU is registered to the set.
WAIT_GPU_LOST = (-1, -1)


@dataclass
class FakeGpuProcess:
    """A process holding a simulated GPU: host PID, GPU memory in bytes, NVML list, SM/memory %.

    ``used_bytes`` ``None`` answers NVML_VALUE_NOT_AVAILABLE (as under WDDM or for a MIG
    process without the right privileges).
    """

    pid: int
    used_bytes: int | None = None
    kind: Literal["compute", "graphics"] = "compute"
    sm_pct: int = 0
    mem_pct: int = 0


@dataclass
class FakeGpu:
    """One simulated NVIDIA GPU's state, in NVML units; `FakeNvmlMachine.lock` guards it.

    ``fan_pct`` ``None`` answers NOT_SUPPORTED (passively cooled SXM2 boards).
    """

    index: int
    uuid: str
    bus: int
    name: str = "Tesla V100-SXM2-16GB"
    serial: str = "0323217012345"
    domain: int = 0
    power_mw: int = 42_000
    power_samples: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=POWER_SAMPLE_BUFFER))
    power_instant_supported: bool = True
    energy_mj: float = 183_512_734_221.0
    power_limit_mw: int = 300_000
    enforced_limit_mw: int = 300_000
    default_limit_mw: int = 300_000
    clock_graphics_mhz: int = 135
    clock_sm_mhz: int = 135
    clock_mem_mhz: int = 877
    app_clock_graphics_mhz: int = DEFAULT_APP_CLOCKS[1]
    app_clock_mem_mhz: int = DEFAULT_APP_CLOCKS[0]
    #: The board's default application clocks (memory, graphics) in MHz: what
    #: ``nvmlDeviceGetDefaultApplicationsClock`` answers and what a reset (of the clocks or the GPU) puts back.
    default_app_clocks: tuple[int, int] = DEFAULT_APP_CLOCKS
    #: Someone set the application clocks (the guard, ``nvidia-smi -ac``): they cap the boost.
    app_clocks_set: bool = False
    #: Locked graphics clock range (``nvidia-smi -lgc``); ``None``: not locked.
    locked_clock_min_mhz: int | None = None
    locked_clock_max_mhz: int | None = None
    persistence_mode: int = 0
    max_clock_graphics_mhz: int = 1530
    max_clock_sm_mhz: int = 1530
    max_clock_mem_mhz: int = 877
    clock_reasons: int = 0x1
    violation_power_ns: int = 0
    violation_thermal_ns: int = 0
    temp_c: int = 35
    fan_pct: int | None = None
    util_gpu_pct: int = 0
    util_mem_pct: int = 0
    mem_total_bytes: int = V100_MEMORY_BYTES
    mem_used_bytes: int = IDLE_MEM_USED_BYTES
    pstate: int = 8
    pcie_gen: int = 3
    pcie_width: int = 16
    pcie_gen_max: int = 3
    pcie_width_max: int = 16
    pcie_replay: int = 0
    nvlink_active: list[bool] = field(default_factory=lambda: [True] * 6)
    #: The driver answers NVML_FI_DEV_NVLINK_LINK_COUNT (len(nvlink_active)); old drivers do not.
    nvlink_count_field: bool = True
    #: What the driver answers for that field instead of the number of links (a garbled answer).
    nvlink_count_answer: int | None = None
    #: Link indices the driver answers nvmlDeviceGetNvLinkState for; past the GPU's own links it
    #: answers DISABLED (as drivers that fill every index up to NVML_NVLINK_MAX_LINKS do);
    #: ``None``: only the GPU's own links, INVALID_ARGUMENT beyond.
    nvlink_state_indices: int | None = None
    nvlink_counters: dict[tuple[int, int], int] = field(default_factory=dict)
    #: Volatile ECC error counts (``NVML_VOLATILE_ECC``): since the driver's last load or the GPU's last reset.
    ecc_corrected: int = 0
    ecc_uncorrected: int = 0
    #: ECC errors counted before the volatile ones (earlier driver loads, resets): the aggregate
    #: counter (``NVML_AGGREGATE_ECC``, the device's lifetime) answers these plus the volatile ones.
    ecc_corrected_earlier: int = 0
    ecc_uncorrected_earlier: int = 0
    lost: bool = False
    #: What nvmlDeviceGetHandleByIndex answers for this GPU instead of a handle (``None``: a
    #: handle), e.g. 999 UNKNOWN: nvidia-smi's "Unable to determine the device handle for GPU
    #: 0000:1d:00.0: Unknown Error", as drivers answer for a GPU that fell off the bus.
    handle_error: int | None = None
    not_supported: set[str] = field(default_factory=set)
    processes: list[FakeGpuProcess] = field(default_factory=list)
    #: Microsecond timestamp of the driver's last per-process utilisation sample.
    process_sample_us: int = 0

    def reset_board(self) -> None:
        """Put back what a GPU reset (``nvidia-smi -r``, the driver re-probing the board) resets.

        NVML's setters say their values last until a reboot or a driver reload: the default
        application clocks come back, a locked clock range goes and the power limit is the
        board's default again. The counters kept since the driver's load start again at zero:
        the energy counter ("mJ since the driver was last loaded ... resets on driver
        reload/reset"), the NVLink error counters ("since driver load (reset by ... or
        reset/reboot)"), the volatile ECC counts (the aggregate ones keep them). A reset runs
        only on a GPU no process uses (``nvidia-smi -r`` refuses one in use): none is left on
        it, nor its memory. Persistence mode is the driver's setting, not the board's: it
        stays as it was.
        """
        self.app_clock_mem_mhz, self.app_clock_graphics_mhz = self.default_app_clocks
        self.app_clocks_set = False
        self.locked_clock_min_mhz = self.locked_clock_max_mhz = None
        self.power_limit_mw = self.enforced_limit_mw = self.default_limit_mw
        self.energy_mj = 0.0
        self.nvlink_counters = {}
        self.ecc_corrected_earlier += self.ecc_corrected
        self.ecc_uncorrected_earlier += self.ecc_uncorrected
        self.ecc_corrected = self.ecc_uncorrected = 0
        self.processes = []
        self.mem_used_bytes = IDLE_MEM_USED_BYTES

    def ecc_count(self, corrected: bool, aggregate: bool) -> int:
        """ECC errors counted: corrected or uncorrected, volatile or aggregate (the volatile ones included)."""
        volatile = self.ecc_corrected if corrected else self.ecc_uncorrected
        if not aggregate:
            return volatile
        return volatile + (self.ecc_corrected_earlier if corrected else self.ecc_uncorrected_earlier)

    @property
    def bus_id(self) -> str:
        """NVML's spelling of the PCI address: ``00000000:1A:00.0``."""
        return f"{self.domain:08X}:{self.bus:02X}:00.0"

    @property
    def sysfs_bus_id(self) -> str:
        """The kernel's spelling: ``0000:1a:00.0``."""
        return f"{self.domain:04x}:{self.bus:02x}:00.0"


def v100_sxm2_gpus(count: int = 4, first_bus: int = 0x1A, seed: int = 0) -> list[FakeGpu]:
    """The reference rig's GPUs: ``count`` idle Tesla V100-SXM2-16GB on consecutive buses."""
    gpus = []
    for i in range(count):
        uuid = f"GPU-{seed:08x}-{i:04x}-4c4e-9a57-{0x3f0d2b6c91aa + i:012x}"
        gpus.append(FakeGpu(index=i, uuid=uuid, bus=first_bus + i, serial=f"03232170{12345 + i}"))
    return gpus


class FakeNvmlMachine:
    """One simulated node's NVIDIA driver: its GPUs, failures and pending Xid events.

    Args:
        gpus: the GPUs, in NVML index order.
        driver_version: what ``nvmlSystemGetDriverVersion`` answers.
        missing_symbols: symbols this driver lacks (answer FUNCTION_NOT_FOUND).
    """

    def __init__(self, gpus: Iterable[FakeGpu], driver_version: str = "535.183.01",
                 missing_symbols: Iterable[str] = ()) -> None:
        self.gpus = list(gpus)
        self.driver_version = driver_version
        self.missing_symbols = set(missing_symbols)
        self.lock = threading.Lock()
        #: Calls answered per symbol (as a driver's call statistics would show them).
        self.calls: Counter[str] = Counter()
        self.driver_missing = False
        #: What ``nvmlInit`` answers instead of success (``None``: success), e.g. 18
        #: LIB_RM_VERSION_MISMATCH after a driver update without a reboot, or 4 NO_PERMISSION
        #: when the agent may not open /dev/nvidiactl.
        self.init_error: int | None = None
        #: Writes (clocks, limits, persistence) answer NO_PERMISSION: an agent that is not root.
        self.no_permission = False
        #: ``nvidia-smi -acp UNRESTRICTED``: with ``no_permission``, application clocks may still be
        #: set and reset (locked clocks, power limits and persistence mode stay root's).
        self.app_clocks_unrestricted = False
        self.init_count = 0
        #: Every event wait answers GPU_IS_LOST while any GPU is lost, registered to its set or not
        #: (NVML says only "if a GPU has fallen off the bus"): by default only a set the lost GPU is
        #: registered to does, and a set registered again without it waits as before.
        self.events_lost_while_any_gpu_lost = False
        self._running = threading.Event()
        self._running.set()
        #: Symbols a ``hang`` named only these blocks (the others answer), and the gate they wait on.
        self._hung_symbols: frozenset[str] = frozenset()
        self._symbols_running = threading.Event()
        self._symbols_running.set()
        self._events = threading.Condition(self.lock)
        self._queues: dict[int, deque[tuple[int, int]]] = {}
        self._registered: dict[int, set[int]] = {}

    def fail(self, failure: FailureName, gpu: int | None = None, symbols: Iterable[str] = ()) -> None:
        """Switch a named failure on (``gpu`` for the per-GPU ones)."""
        self._switch(failure, gpu, set(symbols), on=True)

    def heal(self, failure: FailureName, gpu: int | None = None) -> None:
        """Switch a named failure off; healing ``gpu_lost`` is a reset: the GPU's clocks and power limit
        go back to the board's defaults, its driver counters start again, no process is left on it
        (`FakeGpu.reset_board`) and its event registrations go."""
        self._switch(failure, gpu, set(), on=False)

    def _switch(self, failure: FailureName, gpu: int | None, symbols: set[str], on: bool) -> None:
        if failure == "hang":
            # Not under the lock: hung calls hold no lock while they wait. With symbols, only
            # those block (an event wait stuck in the driver while the reads still answer).
            if on and symbols:
                self._hung_symbols = frozenset(symbols)
                self._symbols_running.clear()
            elif on:
                self._running.clear()
            else:
                self._running.set()
                self._symbols_running.set()
                self._hung_symbols = frozenset()
            return
        with self.lock:
            if failure == "driver_missing":
                self.driver_missing = on
                return
            if gpu is None:
                raise ValueError(f"failure {failure} needs a GPU index")
            target = self.gpus[gpu]
            if failure == "gpu_lost":
                if target.lost and not on:
                    # A lost GPU answers again only after a reset (nvidia-smi -r, a PCI remove and
                    # rescan): the driver tears the device down, and every client's event
                    # registration for it goes with it.
                    for devices in self._registered.values():
                        devices.discard(gpu)
                    target.reset_board()
                target.lost = on
            elif failure == "not_supported":
                target.not_supported = (symbols or set(OPTIONAL_SYMBOLS)) if on else set()

    def post_xid(self, index: int, xid: int) -> None:
        """Deliver an Xid critical error event for GPU ``index`` to every registered event set."""
        with self._events:
            for set_id, devices in self._registered.items():
                if index in devices:
                    self._queues[set_id].append((index, xid))
            self._events.notify_all()

    def wait_running(self, symbol: str | None = None) -> None:
        """Block while the ``hang`` failure is on for ``symbol`` (called by every symbol)."""
        self._running.wait()
        if symbol is not None and symbol in self._hung_symbols:
            self._symbols_running.wait()

    def register_xid_events(self, set_id: int, index: int) -> None:
        """Deliver GPU ``index``'s Xid events to event set ``set_id`` from now on.

        For ``nvmlDeviceRegisterEvents``; call under ``lock``.
        """
        self._registered.setdefault(set_id, set()).add(index)
        self._queues.setdefault(set_id, deque())

    def wait_xid_event(self, set_id: int, timeout_s: float) -> tuple[int, int] | None:
        """The next ``(gpu index, xid)`` queued for event set ``set_id``, waiting up to ``timeout_s``.

        A set with a lost GPU registered (any set, with ``events_lost_while_any_gpu_lost``) answers
        at once with `WAIT_GPU_LOST` once its queued events are taken (the driver's wait answers
        GPU_IS_LOST, on every wait, as long as the GPU stays lost).

        Returns:
            ``None`` when none came in time, or the set has no GPU registered.
        """
        with self._events:
            queue = self._queues.get(set_id)
            if queue is None:
                return None
            if not queue and self._set_has_lost_gpu(set_id):
                return WAIT_GPU_LOST
            if not queue:
                self._events.wait(timeout_s)
            return queue.popleft() if queue else None

    def _set_has_lost_gpu(self, set_id: int) -> bool:
        if self.events_lost_while_any_gpu_lost:
            return any(gpu.lost for gpu in self.gpus)
        return any(0 <= i < len(self.gpus) and self.gpus[i].lost for i in self._registered.get(set_id, ()))

    def event_sets(self) -> dict[int, frozenset[int]]:
        """The event sets a client holds now, each with the GPU indices registered to it.

        What the driver's open event handles would show: a set appears when a client registers
        a GPU for Xid events (``nvmlDeviceRegisterEvents``) and goes when it frees the set
        (``nvmlEventSetFree``); so a test sees whether a client let go of its handles.

        Returns:
            a copy, by event set id; empty when no set is held.
        """
        with self.lock:
            return {set_id: frozenset(devices) for set_id, devices in self._registered.items()}

    def free_event_set(self, set_id: int) -> None:
        """Forget event set ``set_id`` and what was queued for it (``nvmlEventSetFree``; call under ``lock``)."""
        self._registered.pop(set_id, None)
        self._queues.pop(set_id, None)


_PROFILES: dict[str, Callable[[int], list[FakeGpu]]] = {
    "v100-sxm2-16gb": v100_sxm2_gpus,
}


def machine_from_toml(data: dict[str, Any]) -> FakeNvmlMachine:
    """Build a machine from a scenario folder's ``nvml.toml``.

    Keys: ``profile`` (``v100-sxm2-16gb``), ``count``, ``driver_version``,
    ``missing_symbols`` (list), ``driver_missing`` (bool), ``init_error`` (the NVML return
    code ``nvmlInit`` answers), and ``[[gpu]]`` tables with
    ``index`` plus any `FakeGpu` field to override, ``processes`` (tables of
    `FakeGpuProcess` fields), ``power_samples_mw`` (list of
    ``[timestamp_us, mW]``), ``failures`` (``gpu_lost``, ``not_supported``) and
    ``not_supported`` (symbol names).

    Raises:
        ValueError: an unknown profile, GPU field or failure.
    """
    profile = str(data.get("profile", "v100-sxm2-16gb"))
    if profile not in _PROFILES:
        raise ValueError(f"profile: unknown {profile!r} (known: {', '.join(_PROFILES)})")
    gpus = _PROFILES[profile](int(data.get("count", 4)))
    machine = FakeNvmlMachine(gpus, driver_version=str(data.get("driver_version", "535.183.01")),
                              missing_symbols=[str(s) for s in data.get("missing_symbols", [])])
    known = set(FakeGpu.__dataclass_fields__) - {"index", "power_samples", "not_supported", "lost", "nvlink_counters",
                                                 "processes"}
    for table in data.get("gpu", []):
        gpu = gpus[int(table["index"])]
        for key, value in table.items():
            if key == "index":
                continue
            if key == "power_samples_mw":
                gpu.power_samples.extend((int(ts), int(mw)) for ts, mw in value)
            elif key == "failures":
                for failure in value:
                    if failure not in ("gpu_lost", "not_supported"):
                        raise ValueError(f"gpu[{gpu.index}].failures: unknown {failure!r}")
                    machine.fail(failure, gpu.index, table.get("not_supported", ()))
            elif key == "not_supported":
                continue
            elif key == "processes":
                gpu.processes = [FakeGpuProcess(**proc) for proc in value]
            elif key == "nvlink_errors":
                for link, counter, count in value:
                    gpu.nvlink_counters[(int(link), int(counter))] = int(count)
            elif key in known:
                # TOML has no tuples: a pair (``default_app_clocks = [877, 1245]``) comes as a list.
                setattr(gpu, key, tuple(value) if isinstance(getattr(gpu, key), tuple) else value)
            else:
                raise ValueError(f"gpu[{gpu.index}].{key}: unknown field")
    if data.get("driver_missing"):
        machine.fail("driver_missing")
    if data.get("init_error") is not None:
        machine.init_error = int(data["init_error"])
    return machine
