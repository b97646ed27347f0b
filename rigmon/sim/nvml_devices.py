"""Fake NVML system and device-query symbols: init, driver, handles, PCI, power, clocks, sensors, NVLink, ECC."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rigmon.sim.nvml_abi import (
    ECC_COUNTER_AGGREGATE,
    ERROR_GPU_IS_LOST,
    ERROR_INVALID_ARGUMENT,
    ERROR_NOT_FOUND,
    ERROR_NOT_SUPPORTED,
    ERROR_TEXT,
    HANDLE_BASE,
    MEMORY_ERROR_TYPE_CORRECTED,
    PERF_POLICY_POWER,
    PERF_POLICY_THERMAL,
    SUCCESS,
    TEMPERATURE_GPU,
    TOTAL_POWER_SAMPLES,
    VALUE_TYPE_UNSIGNED_INT,
    int_arg,
    set_out,
    write_handle,
)
from rigmon.sim.nvml_machine import NVLINK_COUNTERS, V100_DEVICE_ID, V100_SUBSYSTEM_ID, FakeGpu, FakeNvmlMachine

if TYPE_CHECKING:
    from rigmon.sim.nvml import FakeNvmlLibrary


def device_symbols(lib: FakeNvmlLibrary) -> dict[str, Callable[..., Any]]:
    """The system and device-query symbols for ``lib``'s symbol table: init, driver, handles, PCI,
    power, clocks, sensors, NVLink, ECC."""
    s: dict[str, Callable[..., Any]] = {}

    def init(flags: Any) -> int:
        def on(machine: FakeNvmlMachine) -> int:
            if machine.init_error is not None:
                return machine.init_error
            machine.init_count += 1
            return SUCCESS

        return lib.system_call("nvmlInitWithFlags", on)

    def shutdown() -> int:
        machine = lib.machine()
        if machine is not None:
            with machine.lock:
                machine.init_count = max(0, machine.init_count - 1)
        return SUCCESS

    def error_string(code: Any) -> bytes:
        return ERROR_TEXT.get(int_arg(code), b"Fake NVML error")

    def driver_version(buf: Any, length: Any) -> int:
        def on(machine: FakeNvmlMachine) -> int:
            buf.value = machine.driver_version.encode()
            return SUCCESS

        return lib.system_call("nvmlSystemGetDriverVersion", on)

    def count(out: Any) -> int:
        def on(machine: FakeNvmlMachine) -> int:
            set_out(out, len(machine.gpus))
            return SUCCESS

        return lib.system_call("nvmlDeviceGetCount_v2", on)

    def handle_by_index(index: Any, out: Any) -> int:
        def on(machine: FakeNvmlMachine) -> int:
            i = int_arg(index)
            if not 0 <= i < len(machine.gpus):
                return ERROR_INVALID_ARGUMENT
            if machine.gpus[i].lost:
                return ERROR_GPU_IS_LOST
            handle_error = machine.gpus[i].handle_error
            if handle_error is not None:
                return handle_error
            write_handle(out, HANDLE_BASE + i)
            return SUCCESS

        return lib.system_call("nvmlDeviceGetHandleByIndex_v2", on)

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

        return lib.device_call("nvmlDeviceGetPciInfo_v3", handle, fill)

    def samples(handle: Any, kind: Any, since: Any, value_type: Any, count_out: Any, buf: Any) -> int:
        def fill(gpu: FakeGpu) -> int:
            if int_arg(kind) != TOTAL_POWER_SAMPLES:
                return ERROR_NOT_SUPPORTED
            after = int_arg(since)
            newer = [smp for smp in gpu.power_samples if smp[0] > after]
            if not newer:
                return ERROR_NOT_FOUND
            set_out(value_type, VALUE_TYPE_UNSIGNED_INT)
            if buf is None:
                set_out(count_out, len(newer))
                return SUCCESS
            room = count_out._obj.value
            for i, (ts_us, mw) in enumerate(newer[:room]):
                buf[i].timeStamp = ts_us
                buf[i].sampleValue.uiVal = mw
            set_out(count_out, min(room, len(newer)))
            return SUCCESS

        return lib.device_call("nvmlDeviceGetSamples", handle, fill)

    def limit_constraints(handle: Any, low: Any, high: Any) -> int:
        def fill(gpu: FakeGpu) -> int:
            set_out(low, 150_000)
            set_out(high, gpu.default_limit_mw)
            return SUCCESS

        return lib.device_call("nvmlDeviceGetPowerManagementLimitConstraints", handle, fill)

    def violation(handle: Any, policy: Any, out: Any) -> int:
        def fill(gpu: FakeGpu) -> int:
            p = int_arg(policy)
            if p not in (PERF_POLICY_POWER, PERF_POLICY_THERMAL):
                return ERROR_NOT_SUPPORTED
            out._obj.referenceTime = 0
            out._obj.violationTime = gpu.violation_power_ns if p == 0 else gpu.violation_thermal_ns
            return SUCCESS

        return lib.device_call("nvmlDeviceGetViolationStatus", handle, fill)

    def temperature(handle: Any, sensor: Any, out: Any) -> int:
        def fill(gpu: FakeGpu) -> int:
            if int_arg(sensor) != TEMPERATURE_GPU:
                return ERROR_NOT_SUPPORTED
            set_out(out, gpu.temp_c)
            return SUCCESS

        return lib.device_call("nvmlDeviceGetTemperature", handle, fill)

    def utilization(handle: Any, out: Any) -> int:
        def fill(gpu: FakeGpu) -> int:
            out._obj.gpu = gpu.util_gpu_pct
            out._obj.memory = gpu.util_mem_pct
            return SUCCESS

        return lib.device_call("nvmlDeviceGetUtilizationRates", handle, fill)

    def memory(handle: Any, out: Any) -> int:
        def fill(gpu: FakeGpu) -> int:
            out._obj.total = gpu.mem_total_bytes
            out._obj.used = gpu.mem_used_bytes
            out._obj.free = gpu.mem_total_bytes - gpu.mem_used_bytes
            return SUCCESS

        return lib.device_call("nvmlDeviceGetMemoryInfo", handle, fill)

    def nvlink_state(handle: Any, link: Any, out: Any) -> int:
        def fill(gpu: FakeGpu) -> int:
            i = int_arg(link)
            if len(gpu.nvlink_active) <= i < (gpu.nvlink_state_indices or 0):
                set_out(out, 0)  # a driver that answers every index: "disabled" past the real links
                return SUCCESS
            if not 0 <= i < len(gpu.nvlink_active):
                return ERROR_INVALID_ARGUMENT
            set_out(out, 1 if gpu.nvlink_active[i] else 0)
            return SUCCESS

        return lib.device_call("nvmlDeviceGetNvLinkState", handle, fill)

    def nvlink_version(handle: Any, link: Any, out: Any) -> int:
        def fill(gpu: FakeGpu) -> int:
            if not 0 <= int_arg(link) < len(gpu.nvlink_active):
                return ERROR_INVALID_ARGUMENT
            set_out(out, 2)
            return SUCCESS

        return lib.device_call("nvmlDeviceGetNvLinkVersion", handle, fill)

    def nvlink_counter(handle: Any, link: Any, counter: Any, out: Any) -> int:
        def fill(gpu: FakeGpu) -> int:
            i, c = int_arg(link), int_arg(counter)
            if not 0 <= i < len(gpu.nvlink_active):
                return ERROR_INVALID_ARGUMENT
            if c not in NVLINK_COUNTERS:
                return ERROR_NOT_SUPPORTED  # DL_ECC_DATA is Ampere+
            set_out(out, gpu.nvlink_counters.get((i, c), 0))
            return SUCCESS

        return lib.device_call("nvmlDeviceGetNvLinkErrorCounter", handle, fill)

    def ecc(handle: Any, error_type: Any, counter_type: Any, out: Any) -> int:
        def fill(gpu: FakeGpu) -> int:
            set_out(out, gpu.ecc_count(int_arg(error_type) == MEMORY_ERROR_TYPE_CORRECTED,
                                       int_arg(counter_type) == ECC_COUNTER_AGGREGATE))
            return SUCCESS

        return lib.device_call("nvmlDeviceGetTotalEccErrors", handle, fill)

    s["nvmlInitWithFlags"] = init
    s["nvmlShutdown"] = shutdown
    s["nvmlErrorString"] = error_string
    s["nvmlSystemGetDriverVersion"] = driver_version
    s["nvmlDeviceGetCount_v2"] = count
    s["nvmlDeviceGetHandleByIndex_v2"] = handle_by_index
    s["nvmlDeviceGetPciInfo_v3"] = pci_info
    s["nvmlDeviceGetName"] = lib.string_symbol("nvmlDeviceGetName", lambda g: g.name)
    s["nvmlDeviceGetUUID"] = lib.string_symbol("nvmlDeviceGetUUID", lambda g: g.uuid)
    s["nvmlDeviceGetSerial"] = lib.string_symbol("nvmlDeviceGetSerial", lambda g: g.serial)
    s["nvmlDeviceGetIndex"] = lib.scalar_symbol("nvmlDeviceGetIndex", lambda g: g.index)
    s["nvmlDeviceGetPowerUsage"] = lib.scalar_symbol("nvmlDeviceGetPowerUsage", lambda g: g.power_mw)
    s["nvmlDeviceGetSamples"] = samples
    s["nvmlDeviceGetTotalEnergyConsumption"] = lib.scalar_symbol(
        "nvmlDeviceGetTotalEnergyConsumption", lambda g: int(g.energy_mj))
    s["nvmlDeviceGetPowerManagementLimit"] = lib.scalar_symbol(
        "nvmlDeviceGetPowerManagementLimit", lambda g: g.power_limit_mw)
    s["nvmlDeviceGetEnforcedPowerLimit"] = lib.scalar_symbol(
        "nvmlDeviceGetEnforcedPowerLimit", lambda g: g.enforced_limit_mw)
    s["nvmlDeviceGetPowerManagementDefaultLimit"] = lib.scalar_symbol(
        "nvmlDeviceGetPowerManagementDefaultLimit", lambda g: g.default_limit_mw)
    s["nvmlDeviceGetPowerManagementLimitConstraints"] = limit_constraints
    s["nvmlDeviceGetClockInfo"] = lib.clock_symbol("nvmlDeviceGetClockInfo", lambda g: {
        0: g.clock_graphics_mhz, 1: g.clock_sm_mhz, 2: g.clock_mem_mhz})
    s["nvmlDeviceGetMaxClockInfo"] = lib.clock_symbol("nvmlDeviceGetMaxClockInfo", lambda g: {
        0: g.max_clock_graphics_mhz, 1: g.max_clock_sm_mhz, 2: g.max_clock_mem_mhz, 3: 1372})
    s["nvmlDeviceGetApplicationsClock"] = lib.clock_symbol("nvmlDeviceGetApplicationsClock", lambda g: {
        0: g.app_clock_graphics_mhz, 1: g.app_clock_graphics_mhz, 2: g.app_clock_mem_mhz})
    s["nvmlDeviceGetDefaultApplicationsClock"] = lib.clock_symbol("nvmlDeviceGetDefaultApplicationsClock", lambda g: {
        0: g.default_app_clocks[1], 1: g.default_app_clocks[1], 2: g.default_app_clocks[0]})
    s["nvmlDeviceGetCurrentClocksEventReasons"] = lib.scalar_symbol(
        "nvmlDeviceGetCurrentClocksEventReasons", lambda g: g.clock_reasons)
    s["nvmlDeviceGetCurrentClocksThrottleReasons"] = lib.scalar_symbol(
        "nvmlDeviceGetCurrentClocksThrottleReasons", lambda g: g.clock_reasons)
    s["nvmlDeviceGetSupportedClocksThrottleReasons"] = lib.scalar_symbol(
        "nvmlDeviceGetSupportedClocksThrottleReasons", lambda g: 0x1FF)
    s["nvmlDeviceGetViolationStatus"] = violation
    s["nvmlDeviceGetTemperature"] = temperature
    s["nvmlDeviceGetFanSpeed"] = lib.scalar_symbol("nvmlDeviceGetFanSpeed", lambda g: g.fan_pct)
    s["nvmlDeviceGetUtilizationRates"] = utilization
    s["nvmlDeviceGetMemoryInfo"] = memory
    s["nvmlDeviceGetPerformanceState"] = lib.scalar_symbol("nvmlDeviceGetPerformanceState", lambda g: g.pstate)
    s["nvmlDeviceGetCurrPcieLinkGeneration"] = lib.scalar_symbol(
        "nvmlDeviceGetCurrPcieLinkGeneration", lambda g: g.pcie_gen)
    s["nvmlDeviceGetCurrPcieLinkWidth"] = lib.scalar_symbol("nvmlDeviceGetCurrPcieLinkWidth", lambda g: g.pcie_width)
    s["nvmlDeviceGetMaxPcieLinkGeneration"] = lib.scalar_symbol(
        "nvmlDeviceGetMaxPcieLinkGeneration", lambda g: g.pcie_gen_max)
    s["nvmlDeviceGetMaxPcieLinkWidth"] = lib.scalar_symbol(
        "nvmlDeviceGetMaxPcieLinkWidth", lambda g: g.pcie_width_max)
    s["nvmlDeviceGetPcieReplayCounter"] = lib.scalar_symbol("nvmlDeviceGetPcieReplayCounter", lambda g: g.pcie_replay)
    s["nvmlDeviceGetNvLinkState"] = nvlink_state
    s["nvmlDeviceGetNvLinkVersion"] = nvlink_version
    s["nvmlDeviceGetNvLinkErrorCounter"] = nvlink_counter
    s["nvmlDeviceGetTotalEccErrors"] = ecc
    s["nvmlDeviceGetSupportedEventTypes"] = lib.scalar_symbol(
        "nvmlDeviceGetSupportedEventTypes", lambda g: 0x1 | 0x2 | 0x4 | 0x8 | 0x10)
    return s
