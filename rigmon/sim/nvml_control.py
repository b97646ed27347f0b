"""Fake NVML symbols that change a simulated GPU: application and locked clocks, power limit, persistence.

Part of `rigmon.sim.nvml.FakeNvmlLibrary`'s symbol table. They answer as a V100-era driver:
NO_PERMISSION for every write when the machine's ``no_permission`` is set (an agent that is
not root; application clocks excepted under ``app_clocks_unrestricted``, ``nvidia-smi -acp 0``),
INVALID_ARGUMENT for a clock the GPU does not support or a power limit outside its constraints,
and they block like every other symbol under the ``hang`` failure. The simulated GPUs' power
follows what is set here (`rigmon.sim.gpu.SimNvidiaGpus`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rigmon.sim.nvml_abi import ERROR_INSUFFICIENT_SIZE, ERROR_INVALID_ARGUMENT, ERROR_NO_PERMISSION, SUCCESS, int_arg
from rigmon.sim.nvml_machine import FakeGpu

if TYPE_CHECKING:
    from rigmon.sim.nvml import FakeNvmlLibrary

#: nvmlDeviceGetPowerManagementLimitConstraints' minimum on a V100-SXM2 (mW).
MIN_LIMIT_MW = 150_000
#: The writes ``nvidia-smi -acp UNRESTRICTED`` opens to every user.
APP_CLOCK_WRITES = frozenset({"nvmlDeviceSetApplicationsClocks", "nvmlDeviceResetApplicationsClocks"})


def supported_graphics_mhz(gpu: FakeGpu) -> tuple[int, ...]:
    """A V100's graphics clocks, descending from the maximum to 135 MHz in 7.5 MHz steps (with the default
    application clock, 1312)."""
    top = gpu.max_clock_graphics_mhz
    clocks = {int(round(top - k * 7.5)) for k in range(int((top - 135) / 7.5) + 1)} | {gpu.default_app_clocks[1]}
    return tuple(sorted(clocks, reverse=True))


def _fill_list(values: tuple[int, ...], count: Any, arr: Any) -> int:
    """NVML's two-call list protocol: NULL array -> INSUFFICIENT_SIZE with the count; then fill."""
    if arr is None:
        count._obj.value = len(values)
        return ERROR_INSUFFICIENT_SIZE if values else SUCCESS
    room = count._obj.value
    if room < len(values):
        count._obj.value = len(values)
        return ERROR_INSUFFICIENT_SIZE
    for i, v in enumerate(values):
        arr[i] = v
    count._obj.value = len(values)
    return SUCCESS


def control_symbols(lib: FakeNvmlLibrary) -> dict[str, Callable[..., Any]]:
    """The write symbols (and the reads that go with them) for ``lib``'s symbol table."""

    def writable(name: str, handle: Any, change: Callable[[FakeGpu], int]) -> int:
        def fill(gpu: FakeGpu) -> int:
            machine = lib.machine()
            if machine is not None and machine.no_permission and not (
                    machine.app_clocks_unrestricted and name in APP_CLOCK_WRITES):
                return ERROR_NO_PERMISSION
            return change(gpu)

        return lib.device_call(name, handle, fill)

    def set_app_clocks(handle: Any, mem: Any, graphics: Any) -> int:
        def change(gpu: FakeGpu) -> int:
            m, g = int_arg(mem), int_arg(graphics)
            if m != gpu.max_clock_mem_mhz or g not in supported_graphics_mhz(gpu):
                return ERROR_INVALID_ARGUMENT
            gpu.app_clock_mem_mhz, gpu.app_clock_graphics_mhz = m, g
            gpu.app_clocks_set = (m, g) != tuple(gpu.default_app_clocks)
            return SUCCESS

        return writable("nvmlDeviceSetApplicationsClocks", handle, change)

    def reset_app_clocks(handle: Any) -> int:
        def change(gpu: FakeGpu) -> int:
            gpu.app_clock_mem_mhz, gpu.app_clock_graphics_mhz = gpu.default_app_clocks
            gpu.app_clocks_set = False
            return SUCCESS

        return writable("nvmlDeviceResetApplicationsClocks", handle, change)

    def set_locked(handle: Any, low: Any, high: Any) -> int:
        def change(gpu: FakeGpu) -> int:
            lo, hi = int_arg(low), int_arg(high)
            if not 0 < lo <= hi:
                return ERROR_INVALID_ARGUMENT
            gpu.locked_clock_min_mhz, gpu.locked_clock_max_mhz = lo, hi
            return SUCCESS

        return writable("nvmlDeviceSetGpuLockedClocks", handle, change)

    def reset_locked(handle: Any) -> int:
        def change(gpu: FakeGpu) -> int:
            gpu.locked_clock_min_mhz = gpu.locked_clock_max_mhz = None
            return SUCCESS

        return writable("nvmlDeviceResetGpuLockedClocks", handle, change)

    def set_limit(handle: Any, limit: Any) -> int:
        def change(gpu: FakeGpu) -> int:
            mw = int_arg(limit)
            if not MIN_LIMIT_MW <= mw <= gpu.default_limit_mw:
                return ERROR_INVALID_ARGUMENT
            gpu.power_limit_mw = gpu.enforced_limit_mw = mw
            return SUCCESS

        return writable("nvmlDeviceSetPowerManagementLimit", handle, change)

    def set_persistence(handle: Any, mode: Any) -> int:
        def change(gpu: FakeGpu) -> int:
            gpu.persistence_mode = 1 if int_arg(mode) else 0
            return SUCCESS

        return writable("nvmlDeviceSetPersistenceMode", handle, change)

    def get_persistence(handle: Any, out: Any) -> int:
        def fill(gpu: FakeGpu) -> int:
            out._obj.value = gpu.persistence_mode
            return SUCCESS

        return lib.device_call("nvmlDeviceGetPersistenceMode", handle, fill)

    def supported_mem(handle: Any, count: Any, arr: Any) -> int:
        return lib.device_call("nvmlDeviceGetSupportedMemoryClocks", handle,
                           lambda gpu: _fill_list((gpu.max_clock_mem_mhz,), count, arr))

    def supported_graphics(handle: Any, mem: Any, count: Any, arr: Any) -> int:
        def fill(gpu: FakeGpu) -> int:
            if int_arg(mem) != gpu.max_clock_mem_mhz:
                return 6  # NOT_FOUND: an unknown memory clock
            return _fill_list(supported_graphics_mhz(gpu), count, arr)

        return lib.device_call("nvmlDeviceGetSupportedGraphicsClocks", handle, fill)

    return {
        "nvmlDeviceSetApplicationsClocks": set_app_clocks,
        "nvmlDeviceResetApplicationsClocks": reset_app_clocks,
        "nvmlDeviceSetGpuLockedClocks": set_locked,
        "nvmlDeviceResetGpuLockedClocks": reset_locked,
        "nvmlDeviceSetPowerManagementLimit": set_limit,
        "nvmlDeviceSetPersistenceMode": set_persistence,
        "nvmlDeviceGetPersistenceMode": get_persistence,
        "nvmlDeviceGetSupportedMemoryClocks": supported_mem,
        "nvmlDeviceGetSupportedGraphicsClocks": supported_graphics,
    }
