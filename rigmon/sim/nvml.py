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
GPU_IS_LOST; healed, the GPU was reset: its event registrations are gone), ``driver_missing`` (init and every call answer DRIVER_NOT_LOADED) and
``hang`` (every call, or only the named symbols, blocks until the failure is healed).
Driver answers set as state: `FakeNvmlMachine.init_error` (what ``nvmlInit`` answers: a
driver/library version mismatch, no permission), `FakeGpu.handle_error` (a GPU the driver
counts but gives no handle for: "Unknown Error" off the bus), and an event wait answers
GPU_IS_LOST while a lost GPU is registered to its set.

The symbol table is built per NVML area: `rigmon.sim.nvml_devices` (system and device
queries), `nvml_fields` (field values), `nvml_processes`, `nvml_events` and `nvml_control`
(writes); return codes and ctypes plumbing are `rigmon.sim.nvml_abi`. The machine side (GPU
state, failures, Xid queues, ``nvml.toml`` loading) is `rigmon.sim.nvml_machine`. Their
public names are importable from here too.
"""

from __future__ import annotations

import contextlib
import os
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

from rigmon.hw.nvml import bind_library, current_target
from rigmon.sim.nvml_abi import (
    ERROR_DRIVER_NOT_LOADED,
    ERROR_FUNCTION_NOT_FOUND,
    ERROR_GPU_IS_LOST,
    ERROR_INSUFFICIENT_SIZE,
    ERROR_INVALID_ARGUMENT,
    ERROR_NOT_FOUND,
    ERROR_NOT_SUPPORTED,
    ERROR_TIMEOUT,
    ERROR_UNINITIALIZED,
    HANDLE_BASE,
    MEMORY_ERROR_TYPE_CORRECTED,
    PERF_POLICY_POWER,
    PERF_POLICY_THERMAL,
    SUCCESS,
    TEMPERATURE_GPU,
    TOTAL_POWER_SAMPLES,
    VALUE_TYPE_UNSIGNED_INT,
    handle_value,
    int_arg,
    set_out,
)
from rigmon.sim.nvml_control import control_symbols
from rigmon.sim.nvml_devices import device_symbols
from rigmon.sim.nvml_events import event_symbols
from rigmon.sim.nvml_fields import (
    FI_DEV_NVLINK_GET_STATE,
    FI_DEV_NVLINK_LINK_COUNT,
    FI_DEV_POWER_INSTANT,
    field_symbols,
)
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
from rigmon.sim.nvml_processes import process_symbols

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

GpuFn = Callable[[FakeGpu], int]


class FakeNvmlLibrary:
    """The process-wide fake ``libnvidia-ml``: plain-function symbols dispatching per target."""

    def __init__(self) -> None:
        self._machines: dict[str | None, FakeNvmlMachine] = {}
        self._lock = threading.Lock()
        self._previous_lib: Any = None
        self._installed = False
        self._next_set = 0
        # One table, built per NVML area; each area's symbols run through the plumbing below.
        self.symbols = types.SimpleNamespace(
            **device_symbols(self), **field_symbols(self), **process_symbols(self), **event_symbols(self),
            **control_symbols(self))

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

    # -- the symbol tables' interface ------------------------------------------------------
    #
    # What the NVML area modules (`rigmon.sim.nvml_devices`, `nvml_fields`, `nvml_processes`,
    # `nvml_events`, `nvml_control`) build their symbols from. Internal to the simulator: every
    # symbol but shutdown, the error text, the event wait and freeing an event set answers
    # through `system_call`, the one dispatch point (`benchmarks/agent_full_node.py` times
    # the fake library there).

    def system_call(self, name: str, fn: Callable[[FakeNvmlMachine], int]) -> int:
        """Answer symbol ``name`` from the current call's machine: ``fn(machine)`` under its lock.

        Counts the call, blocks while a ``hang`` holds ``name``, and answers for the driver
        first: DRIVER_NOT_LOADED (no machine for this target, or ``driver_missing``),
        FUNCTION_NOT_FOUND (a symbol this driver lacks), UNINITIALIZED (before ``nvmlInit``).

        Returns:
            the NVML return code.
        """
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

    def device_call(self, name: str, handle: Any, fn: GpuFn) -> int:
        """`system_call` for a device symbol: ``fn(gpu)`` for the GPU ``handle`` names.

        Answers INVALID_ARGUMENT for a handle of no GPU, GPU_IS_LOST for a lost GPU, the GPU's
        ``handle_error`` when it has one and NOT_SUPPORTED when the GPU's ``not_supported``
        failure names ``name``.

        Returns:
            the NVML return code.
        """
        def on_machine(machine: FakeNvmlMachine) -> int:
            index = handle_value(handle) - HANDLE_BASE
            if not 0 <= index < len(machine.gpus):
                return ERROR_INVALID_ARGUMENT
            gpu = machine.gpus[index]
            if gpu.lost:
                return ERROR_GPU_IS_LOST
            if gpu.handle_error is not None:
                return gpu.handle_error
            if name in gpu.not_supported:
                return ERROR_NOT_SUPPORTED
            return fn(gpu)

        return self.system_call(name, on_machine)

    def scalar_symbol(self, name: str, getter: Callable[[FakeGpu], int | None]) -> Callable[[Any, Any], int]:
        """A ``(device, *out)`` symbol writing ``getter(gpu)`` to ``out`` (``None``: NOT_SUPPORTED)."""
        def symbol(handle: Any, out: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                value = getter(gpu)
                if value is None:
                    return ERROR_NOT_SUPPORTED
                set_out(out, value)
                return SUCCESS

            return self.device_call(name, handle, fill)

        return symbol

    def string_symbol(self, name: str, getter: Callable[[FakeGpu], str]) -> Callable[[Any, Any, Any], int]:
        """A ``(device, char *buf, length)`` symbol writing ``getter(gpu)``, cut to the buffer as the driver does."""
        def symbol(handle: Any, buf: Any, length: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                buf.value = getter(gpu).encode()[: int_arg(length) - 1]
                return SUCCESS

            return self.device_call(name, handle, fill)

        return symbol

    def clock_symbol(self, name: str, table: Callable[[FakeGpu], dict[int, int]]) -> Callable[[Any, Any, Any], int]:
        """A ``(device, clock type, *out)`` symbol answering from ``table(gpu)`` (a type not in it: NOT_SUPPORTED)."""
        def symbol(handle: Any, clock_type: Any, out: Any) -> int:
            def fill(gpu: FakeGpu) -> int:
                value = table(gpu).get(int_arg(clock_type))
                if value is None:
                    return ERROR_NOT_SUPPORTED
                set_out(out, value)
                return SUCCESS

            return self.device_call(name, handle, fill)

        return symbol

    def next_event_set_id(self) -> int:
        """A new event set's number, unique in this process (every machine's sets share one count)."""
        with self._lock:
            self._next_set += 1
            return self._next_set

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
