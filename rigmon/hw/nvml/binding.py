"""`PynvmlNvml`: one NVML binding per machine (lazy init, the poll watchdog, the Xid event set), shared
by the collectors of that machine through `open_nvml` and `open_nvml_processes`."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import pynvml

from rigmon.hw.nvml.calls import ABSENT_CODES
from rigmon.hw.nvml.poll import DeviceReader
from rigmon.hw.nvml.processes import read_processes
from rigmon.hw.nvml.records import NvmlDeviceData, NvmlGpuProcesses, NvmlXid
from rigmon.hw.nvml.watchdog import NvmlHung, NvmlStarting, NvmlUnavailable, RunningStopwatch, Watchdog
from rigmon.hw.nvml.xid import XidEvents
from rigmon.hw.root import HostRoot

T = TypeVar("T")

#: Seconds the first ``nvmlInit`` may take before it counts as hung. Without persistence mode the
#: driver initialises every GPU in it (seconds on a V100 box, more with 8 GPUs); polls meanwhile
#: raise `NvmlStarting`. Counted in the process's running time: a stop (SIGSTOP, a paused VM, a
#: debugger) during the init does not use it up (`RunningStopwatch`).
INIT_TIMEOUT_S = 60.0


class PynvmlNvml:
    """`Nvml` and `NvmlProcesses` over the real ``pynvml`` module, every poll behind a watchdog.

    A poll (`read_devices`, `read_all_processes`) is one hand-off to the watchdog thread for
    every GPU; `rigmon.hw.nvml.poll` says what each GPU's read asks. The Xid wait runs on the
    caller's thread (`rigmon.hw.nvml.xid`).

    A poll that overruns while ``nvmlInit`` (in it, or in the Xid thread) has not returned raises
    `NvmlStarting` rather than `NvmlHung`, for up to ``init_timeout_s`` of the process's running
    time since the init began (``clock`` is the monotonic clock that time is measured on).

    Args:
        target: the binding (absolute root path); see `rigmon.hw.nvml`.
        timeout_s: watchdog timeout for one call, or per GPU for a poll of every GPU.
    """

    def __init__(self, target: str | None, timeout_s: float = 2.0) -> None:
        self.target = target
        self.timeout_s = timeout_s
        self.init_timeout_s = INIT_TIMEOUT_S
        self.clock: Callable[[], float] = time.monotonic
        #: The running time of the init in progress (``None``: none is).
        self._init_clock: RunningStopwatch | None = None
        self._init_clock_lock = threading.Lock()
        self._poll = Watchdog("poll", target)
        # Only the poll watchdog's thread touches the reader.
        self._devices = DeviceReader()
        self._process_lists: dict[int, Any] = {}
        self._initialized = False
        # The poll watchdog's thread and the Xid thread both init on first use: one nvmlInit.
        self._init_lock = threading.Lock()
        self._xid = XidEvents(target, self._ensure_init)

    def _ensure_init(self) -> None:
        """Lazy init (in the watchdog thread, or the Xid thread). A missing driver stays a quiet absence."""
        if self._initialized:
            return
        # Timed from here: a thread waiting for another's init waits for the same init.
        self._begin_init_clock()
        with self._init_lock:
            if self._initialized:
                self._end_init_clock()  # begun after that init had returned
                return
            self._begin_init_clock()  # the init waited for failed: this one is timed afresh
            try:
                pynvml.nvmlInit()
                self._initialized = True
            except pynvml.NVMLError as exc:
                if exc.value in ABSENT_CODES:
                    raise NvmlUnavailable(f"NVML: {exc}") from None
                raise
            finally:
                self._end_init_clock()

    def _begin_init_clock(self) -> None:
        with self._init_clock_lock:
            if self._init_clock is None:
                self._init_clock = RunningStopwatch("nvml-init", self.clock).start()

    def _end_init_clock(self) -> None:
        with self._init_clock_lock:
            init_clock, self._init_clock = self._init_clock, None
        if init_clock is not None:
            init_clock.stop()

    def _run(self, fn: Callable[[], T], per_gpu: bool = False) -> T:
        """``fn`` behind the poll watchdog within `timeout_s`, or `timeout_s` for each GPU when ``per_gpu``
        (a poll of every GPU), after NVML's first init (a job of its own, so a slow init overruns alone);
        an overrun while that init has not returned is `NvmlStarting` within `init_timeout_s`, and
        `NvmlHung` naming the init after it.

        The first poll of every GPU counts them first, in a job of its own: it reads every GPU's facts
        as well, the longest poll of all, and was given one GPU's time (a false hang at the start of a
        node with many GPUs, or on a loaded one)."""
        if not self._initialized:
            self._guarded(self._ensure_init, self.timeout_s)
        if not per_gpu:
            return self._guarded(fn, self.timeout_s)
        if not self._devices.counted:
            self._guarded(self._count, self.timeout_s)
        return self._guarded(fn, self.timeout_s * self._devices.count_hint)

    def _guarded(self, fn: Callable[[], T], timeout_s: float) -> T:
        try:
            return self._poll.run(fn, timeout_s)
        except NvmlHung as exc:
            init_clock = self._init_clock
            init_overran = exc.call == self._ensure_init
            # The init's own job overran before it began to time the init (the watchdog's thread did
            # not get to run it on a loaded machine) is an init that has not returned yet as well.
            if not self._initialized and (init_clock is not None or init_overran):
                waited_s = 0.0 if init_clock is None else init_clock.elapsed()
                if waited_s >= self.init_timeout_s:
                    raise NvmlHung(f"nvmlInit has not returned for {waited_s:.1f} s") from None
                raise NvmlStarting(f"NVML starting: nvmlInit has not returned for {waited_s:.1f} s (the "
                                   "driver initialises the GPUs first without persistence mode: "
                                   "nvidia-smi -pm 1, or nvidia-persistenced)") from None
            if self._initialized and init_overran:
                # The init that overran has returned: its job is ending, or it returned between the
                # watchdog giving up on it and the look above. Judged by the call that overran, not
                # by what is stuck now: a read stuck after such an init is a hang.
                raise NvmlStarting("NVML starting: nvmlInit has returned") from None
            raise

    def _count(self) -> int:
        self._ensure_init()
        return self._devices.count()

    def device_count(self) -> int:
        return self._run(self._count)

    def read_device(self, index: int, samples_since_us: int) -> NvmlDeviceData:
        def call() -> NvmlDeviceData:
            self._ensure_init()
            data = self._devices.read(index, samples_since_us)
            self._rearm_if_returned()
            return data

        return self._run(call)

    def read_devices(self, samples_since_us: Mapping[int, int]) -> list[NvmlDeviceData]:
        def call() -> list[NvmlDeviceData]:
            read = self._devices.read
            datas = [read(index, samples_since_us.get(index, 0)) for index in range(self._count())]
            self._rearm_if_returned()
            return datas

        return self._run(call, per_gpu=True)

    def _rearm_if_returned(self) -> None:
        """A GPU answers again (a reset, a rescan) or the count changed: the Xid event set is
        registered again before the next wait (the driver dropped the GPU's registration)."""
        if self._devices.returned:
            self._devices.returned = False
            self._xid.rearm()

    def read_processes(self, index: int, utils_since_us: int) -> NvmlGpuProcesses:
        def call() -> NvmlGpuProcesses:
            self._ensure_init()
            return read_processes(self._devices, self._process_lists, index, utils_since_us)

        return self._run(call)

    def read_all_processes(self, utils_since_us: Mapping[int, int]) -> list[NvmlGpuProcesses]:
        def call() -> list[NvmlGpuProcesses]:
            return [read_processes(self._devices, self._process_lists, index, utils_since_us.get(index, 0))
                    for index in range(self._count())]

        return self._run(call, per_gpu=True)

    def wait_xid(self, timeout_s: float) -> list[NvmlXid]:
        return self._xid.wait(timeout_s)

    @property
    def xid_waiters(self) -> int:
        """Threads inside `wait_xid` now (one stuck in the driver keeps `close` from freeing the event set)."""
        return self._xid.waiting

    def close(self) -> None:
        self._xid.close()
        self._end_init_clock()  # an init stuck in the driver is not timed for no one
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


class SharedNvml:
    """One collector's use of its machine's shared `PynvmlNvml` (see `open_nvml`): the binding's
    calls, and a `close` that shuts the binding down when its last user closes."""

    def __init__(self, binding: PynvmlNvml) -> None:
        self.binding = binding
        self._closed = False

    def device_count(self) -> int:
        return self.binding.device_count()

    def read_device(self, index: int, samples_since_us: int) -> NvmlDeviceData:
        return self.binding.read_device(index, samples_since_us)

    def read_devices(self, samples_since_us: Mapping[int, int]) -> list[NvmlDeviceData]:
        return self.binding.read_devices(samples_since_us)

    def read_processes(self, index: int, utils_since_us: int) -> NvmlGpuProcesses:
        return self.binding.read_processes(index, utils_since_us)

    def read_all_processes(self, utils_since_us: Mapping[int, int]) -> list[NvmlGpuProcesses]:
        return self.binding.read_all_processes(utils_since_us)

    def wait_xid(self, timeout_s: float) -> list[NvmlXid]:
        return self.binding.wait_xid(timeout_s)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        _release(self.binding)


#: The open bindings by target, with their users (`SharedNvml` not yet closed).
_SHARED: dict[str, tuple[PynvmlNvml, int]] = {}
_SHARED_LOCK = threading.Lock()


def _share(target: str, timeout_s: float) -> SharedNvml:
    with _SHARED_LOCK:
        binding, users = _SHARED.get(target, (None, 0))
        if binding is None:
            binding = PynvmlNvml(target=target, timeout_s=timeout_s)
        _SHARED[target] = (binding, users + 1)
    return SharedNvml(binding)


def _release(binding: PynvmlNvml) -> None:
    assert binding.target is not None
    with _SHARED_LOCK:
        shared, users = _SHARED.get(binding.target, (None, 0))
        if shared is not binding:
            return
        if users > 1:
            _SHARED[binding.target] = (binding, users - 1)
            return
        del _SHARED[binding.target]
    binding.close()


def open_nvml(root: HostRoot, timeout_s: float = 2.0) -> SharedNvml:
    """The `Nvml` of the machine whose files are under ``root``.

    Every collector of one machine shares one binding (one nvmlInit, one poll watchdog thread, one
    set of GPU plans): the first `open_nvml` or `open_nvml_processes` for a root makes it, with that
    caller's ``timeout_s``, and the last `close` shuts it down. The binding's target is the root's
    absolute path; see `rigmon.hw.nvml` for how a library serving several simulated machines uses it.
    """
    return _share(os.path.abspath(root.root), timeout_s)


def open_nvml_processes(root: HostRoot, timeout_s: float = 2.0) -> SharedNvml:
    """The process-listing `NvmlProcesses` of the machine under ``root``: the same shared binding as `open_nvml`."""
    return _share(os.path.abspath(root.root), timeout_s)
