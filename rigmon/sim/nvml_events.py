"""Fake NVML event symbols: event sets, registration and the Xid wait."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rigmon.sim.nvml_abi import (
    ERROR_DRIVER_NOT_LOADED,
    ERROR_GPU_IS_LOST,
    ERROR_TIMEOUT,
    EVENT_SET_BASE,
    HANDLE_BASE,
    NO_INSTANCE,
    SUCCESS,
    handle_value,
    int_arg,
    write_handle,
)
from rigmon.sim.nvml_machine import WAIT_GPU_LOST, FakeGpu, FakeNvmlMachine

if TYPE_CHECKING:
    from rigmon.sim.nvml import FakeNvmlLibrary


def event_symbols(lib: FakeNvmlLibrary) -> dict[str, Callable[..., Any]]:
    """The event-set symbols (create, register, wait for an Xid, free) for ``lib``'s symbol table."""
    s: dict[str, Callable[..., Any]] = {}

    def event_set_create(out: Any) -> int:
        def on(machine: FakeNvmlMachine) -> int:
            write_handle(out, EVENT_SET_BASE + lib.next_event_set_id())
            return SUCCESS

        return lib.system_call("nvmlEventSetCreate", on)

    def register_events(handle: Any, event_types: Any, event_set: Any) -> int:
        set_id = handle_value(event_set)

        def fill(gpu: FakeGpu) -> int:
            machine = lib.machine()
            assert machine is not None
            if int_arg(event_types) & 0x8:
                machine.register_xid_events(set_id, gpu.index)
            return SUCCESS

        return lib.device_call("nvmlDeviceRegisterEvents", handle, fill)

    def event_wait(event_set: Any, data: Any, timeout_ms: Any) -> int:
        machine = lib.machine()
        if machine is None:
            return ERROR_DRIVER_NOT_LOADED
        machine.wait_running("nvmlEventSetWait_v2")
        hit = machine.wait_xid_event(handle_value(event_set), int_arg(timeout_ms) / 1000.0)
        if hit is None:
            return ERROR_TIMEOUT
        if hit == WAIT_GPU_LOST:
            return ERROR_GPU_IS_LOST
        index, xid = hit
        out = data._obj
        ctypes.c_void_p.from_address(ctypes.addressof(out) + type(out).device.offset).value = HANDLE_BASE + index
        out.eventType = 0x8
        out.eventData = xid
        out.gpuInstanceId = NO_INSTANCE
        out.computeInstanceId = NO_INSTANCE
        return SUCCESS

    def event_set_free(event_set: Any) -> int:
        machine = lib.machine()
        if machine is not None:
            with machine.lock:
                machine.free_event_set(handle_value(event_set))
        return SUCCESS

    s["nvmlEventSetCreate"] = event_set_create
    s["nvmlDeviceRegisterEvents"] = register_events
    s["nvmlEventSetWait_v2"] = event_wait
    s["nvmlEventSetFree"] = event_set_free
    return s
