"""NVML writes for the undervolt guard: application clocks, locked clocks, power limits, persistence mode.

The only code that changes a GPU's settings. Every call runs behind its own `Watchdog`
(separate from the sampling binding's, so a hung write never holds up a read and the reverse),
bound to the same target as `rigmon.hw.nvml.open_nvml` (the fake library of the simulator
serves both). After each write the value the driver accepted is read back: the driver may
round a clock to a supported one, or clamp a power limit.

NVML refuses writes from a user that is not root (NO_PERMISSION), unless an administrator
allowed application clocks for everyone (``nvidia-smi -acp UNRESTRICTED``); that refusal
is `ControlDenied`, raised once per call and meant to be reported once by the caller.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pynvml

from rigmon.hw.nvml import INIT_TIMEOUT_S, NvmlHung, NvmlUnavailable, Watchdog
from rigmon.hw.root import HostRoot

T = TypeVar("T")

__all__ = [
    "ControlDenied",
    "ControlFailed",
    "ControlUnsupported",
    "GpuControlSettings",
    "NvmlControl",
    "NvmlHung",
    "NvmlUnavailable",
    "open_nvml_control",
]

_ABSENT = {
    pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
    pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
    pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    pynvml.NVML_ERROR_UNINITIALIZED,
}
_UNSUPPORTED = {pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND}


class ControlDenied(Exception):
    """The driver refused a write: the agent is not root (NVML_ERROR_NO_PERMISSION)."""


class ControlUnsupported(Exception):
    """This GPU or driver cannot do that (locked clocks before Volta, an old driver)."""


class ControlFailed(Exception):
    """Any other refusal: a clock the GPU does not support, a lost GPU."""


@dataclass(frozen=True, slots=True)
class GpuControlSettings:
    """The settings of one GPU the guard may change, as the driver reports them.

    ``None`` where the driver does not say. NVML has no getter for locked clocks, so they
    are not here: the guard remembers what it locked.
    """

    index: int
    app_clock_mem_mhz: int | None = None
    app_clock_graphics_mhz: int | None = None
    max_clock_graphics_mhz: int | None = None
    power_limit_mw: int | None = None
    power_limit_min_mw: int | None = None
    power_limit_max_mw: int | None = None
    persistence: bool | None = None


def _raise_for(exc: pynvml.NVMLError, what: str) -> None:
    code = exc.value
    if code == pynvml.NVML_ERROR_NO_PERMISSION:
        raise ControlDenied(f"{what}: no permission (NVML_ERROR_NO_PERMISSION): the agent must run as root") from None
    if code in _UNSUPPORTED:
        raise ControlUnsupported(f"{what}: not supported by this GPU or driver ({exc})") from None
    if code in _ABSENT:
        raise NvmlUnavailable(f"{what}: {exc}") from None
    raise ControlFailed(f"{what}: {exc}") from None


class NvmlControl:
    """Writes GPU settings through ``pynvml``, each call behind a watchdog.

    Args:
        target: the binding (absolute root path), as `rigmon.hw.nvml.PynvmlNvml`.
        timeout_s: how long one call may take; longer is `NvmlHung`, and until that call
            returns every further call fails at once (it never queues behind a hung one).
    """

    def __init__(self, target: str | None, timeout_s: float = 5.0) -> None:
        self.target = target
        self.timeout_s = timeout_s
        #: How long the first call's ``nvmlInit`` may take (`rigmon.hw.nvml.INIT_TIMEOUT_S`).
        self.init_timeout_s = INIT_TIMEOUT_S
        self._watchdog = Watchdog("control", target)
        self._initialized = False
        #: Whether the last `probe` failed for a reason that may pass (no driver yet, a hung or
        #: slow call, no GPU listed yet), as opposed to a refusal (no permission, unsupported).
        self.probe_transient = False

    # -- plumbing ---------------------------------------------------------------------------

    def _run(self, what: str, fn: Callable[[], T]) -> T:
        def init() -> None:
            try:
                if not self._initialized:
                    pynvml.nvmlInit()
                    self._initialized = True
            except pynvml.NVMLError as exc:
                _raise_for(exc, what)

        def call() -> T:
            try:
                return fn()
            except pynvml.NVMLError as exc:
                _raise_for(exc, what)
                raise  # unreachable: _raise_for always raises

        if not self._initialized:
            # A call of its own with a budget of its own: without persistence mode the driver brings
            # every GPU up in nvmlInit (seconds on a V100 box), which is no hung call. The guard's
            # thread waits for it; sampling never does.
            self._watchdog.run(init, max(self.timeout_s, self.init_timeout_s))
        return self._watchdog.run(call, self.timeout_s)

    @staticmethod
    def _optional(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except pynvml.NVMLError:
            return None

    # -- reads ------------------------------------------------------------------------------

    def device_count(self) -> int:
        """GPUs NVML lists (lost ones included)."""
        return self._run("device count", lambda: int(pynvml.nvmlDeviceGetCount()))

    def read(self, index: int) -> GpuControlSettings:
        """The settings of GPU ``index`` now."""
        return self._run(f"GPU {index}: read settings", lambda: self._read(index))

    def _read(self, index: int) -> GpuControlSettings:
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        o = self._optional
        constraints = o(pynvml.nvmlDeviceGetPowerManagementLimitConstraints, h)
        persistence = o(pynvml.nvmlDeviceGetPersistenceMode, h)
        return GpuControlSettings(
            index=index,
            app_clock_mem_mhz=o(pynvml.nvmlDeviceGetApplicationsClock, h, pynvml.NVML_CLOCK_MEM),
            app_clock_graphics_mhz=o(pynvml.nvmlDeviceGetApplicationsClock, h, pynvml.NVML_CLOCK_GRAPHICS),
            max_clock_graphics_mhz=o(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_GRAPHICS),
            power_limit_mw=o(pynvml.nvmlDeviceGetPowerManagementLimit, h),
            power_limit_min_mw=None if constraints is None else int(constraints[0]),
            power_limit_max_mw=None if constraints is None else int(constraints[1]),
            persistence=None if persistence is None else bool(persistence),
        )

    def supported_clocks(self, index: int) -> dict[int, tuple[int, ...]]:
        """Graphics clocks (MHz) the GPU supports, by memory clock (MHz)."""
        def call() -> dict[int, tuple[int, ...]]:
            h = pynvml.nvmlDeviceGetHandleByIndex(index)
            return {int(mem): tuple(int(g) for g in pynvml.nvmlDeviceGetSupportedGraphicsClocks(h, mem))
                    for mem in pynvml.nvmlDeviceGetSupportedMemoryClocks(h)}

        return self._run(f"GPU {index}: supported clocks", call)

    # -- writes -----------------------------------------------------------------------------

    def set_app_clocks(self, index: int, mem_mhz: int, graphics_mhz: int) -> GpuControlSettings:
        """Set the application clocks (``nvidia-smi -ac MEM,GRAPHICS``); returns what the driver kept."""
        def call() -> GpuControlSettings:
            pynvml.nvmlDeviceSetApplicationsClocks(pynvml.nvmlDeviceGetHandleByIndex(index), mem_mhz, graphics_mhz)
            return self._read(index)

        return self._run(f"GPU {index}: set application clocks {mem_mhz},{graphics_mhz} MHz", call)

    def reset_app_clocks(self, index: int) -> GpuControlSettings:
        """Back to the default application clocks (``nvidia-smi -rac``)."""
        def call() -> GpuControlSettings:
            pynvml.nvmlDeviceResetApplicationsClocks(pynvml.nvmlDeviceGetHandleByIndex(index))
            return self._read(index)

        return self._run(f"GPU {index}: reset application clocks", call)

    def set_locked_clocks(self, index: int, min_mhz: int, max_mhz: int) -> None:
        """Lock the graphics clock into ``[min_mhz, max_mhz]`` (``nvidia-smi -lgc``; Volta and newer)."""
        self._run(f"GPU {index}: lock clocks {min_mhz},{max_mhz} MHz",
                  lambda: pynvml.nvmlDeviceSetGpuLockedClocks(pynvml.nvmlDeviceGetHandleByIndex(index),
                                                              min_mhz, max_mhz))

    def reset_locked_clocks(self, index: int) -> None:
        """Unlock the graphics clock (``nvidia-smi -rgc``)."""
        self._run(f"GPU {index}: reset locked clocks",
                  lambda: pynvml.nvmlDeviceResetGpuLockedClocks(pynvml.nvmlDeviceGetHandleByIndex(index)))

    def set_power_limit(self, index: int, limit_mw: int) -> GpuControlSettings:
        """Set the software power limit in milliwatts (``nvidia-smi -pl``); returns what the driver kept."""
        def call() -> GpuControlSettings:
            pynvml.nvmlDeviceSetPowerManagementLimit(pynvml.nvmlDeviceGetHandleByIndex(index), limit_mw)
            return self._read(index)

        return self._run(f"GPU {index}: set power limit {limit_mw / 1000:g} W", call)

    def reset_power_limit(self, index: int) -> GpuControlSettings:
        """Set the power limit back to the board's default (``nvidia-smi -pl`` with the default
        ``nvidia-smi -q -d POWER`` shows): for a GPU whose limit before the guard was not known."""
        def call() -> GpuControlSettings:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            pynvml.nvmlDeviceSetPowerManagementLimit(handle, pynvml.nvmlDeviceGetPowerManagementDefaultLimit(handle))
            return self._read(index)

        return self._run(f"GPU {index}: reset power limit to its default", call)

    def set_persistence(self, index: int, enabled: bool) -> None:
        """Persistence mode (``nvidia-smi -pm``): without it the driver may unload between jobs and
        forget the application clocks."""
        self._run(f"GPU {index}: persistence mode {'on' if enabled else 'off'}",
                  lambda: pynvml.nvmlDeviceSetPersistenceMode(pynvml.nvmlDeviceGetHandleByIndex(index),
                                                              1 if enabled else 0))

    def probe(self) -> str | None:
        """Whether the guard could act on this node: ``None`` if so, else the reason it could not
        (`probe_transient` says whether asking again later may answer otherwise).

        Writes GPU 0's application clocks back unchanged: a no-op the driver still checks
        permission for (there is no "may I" call in NVML).
        """
        self.probe_transient = True
        try:
            count = self.device_count()
            if count == 0:
                return "NVML lists no GPU"
            now = self.read(0)
            if now.app_clock_mem_mhz is None or now.app_clock_graphics_mhz is None:
                self.probe_transient = False
                return "GPU 0 does not report application clocks"
            self.set_app_clocks(0, now.app_clock_mem_mhz, now.app_clock_graphics_mhz)
        except NvmlUnavailable as exc:
            return f"no NVIDIA driver or GPU ({exc})"
        except NvmlHung as exc:
            return str(exc)
        except (ControlDenied, ControlUnsupported, ControlFailed) as exc:
            self.probe_transient = False
            return str(exc)
        self.probe_transient = False
        return None

    def probe_limits(self) -> str | None:
        """Whether the steps after application clocks (locked clocks, a power limit) could be taken:
        ``None`` if so (or when GPU 0 does not report its limit), else why not.

        `probe` answers for application clocks, which ``nvidia-smi -acp UNRESTRICTED`` opens to every
        user; these stay root's. Writes GPU 0's power limit back unchanged (a no-op the driver
        still checks permission for).
        """
        try:
            limit_mw = self.read(0).power_limit_mw
            if limit_mw is None:
                return None
            self.set_power_limit(0, limit_mw)
        except (ControlDenied, ControlUnsupported, ControlFailed, NvmlUnavailable, NvmlHung) as exc:
            return str(exc)
        return None

    def close(self) -> None:
        """Shut this binding's NVML reference down (skipped when a call is stuck)."""
        if not self._watchdog.stuck and self._initialized:
            def shutdown() -> None:
                self._initialized = False
                pynvml.nvmlShutdown()

            try:
                self._watchdog.run(shutdown, self.timeout_s)
            except (NvmlHung, pynvml.NVMLError):
                pass
        self._watchdog.close()


def open_nvml_control(root: HostRoot, timeout_s: float = 5.0) -> NvmlControl:
    """The control binding for the machine whose files are under ``root`` (see `rigmon.hw.nvml.open_nvml`)."""
    return NvmlControl(target=os.path.abspath(root.root), timeout_s=timeout_s)

