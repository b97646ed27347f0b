"""A simulated GPU reset (healing ``gpu_lost``) starts the driver's counters again and leaves no process on
the GPU, as the hardware does; the default application clocks are each board's own. Read through the real
pynvml wrappers."""

from __future__ import annotations

import pynvml

from rigmon.sim.nvml import FakeGpuProcess, serving
from rigmon.sim.nvml_machine import DEFAULT_APP_CLOCKS, IDLE_MEM_USED_BYTES, FakeNvmlMachine, v100_sxm2_gpus

#: nvml.h NVML_FI_DEV_ECC_SBE_VOL_TOTAL, NVML_FI_DEV_ECC_SBE_AGG_TOTAL.
FI_SBE_VOLATILE, FI_SBE_AGGREGATE = 3, 5


def _counters(index: int) -> tuple[int, int, int, int, list[int], int]:
    """GPU ``index``'s energy (mJ), volatile and aggregate corrected ECC counts (by function and by field),
    NVLink 0's replay count, the PIDs on it and its memory used."""
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    volatile = pynvml.nvmlDeviceGetTotalEccErrors(handle, pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                                  pynvml.NVML_VOLATILE_ECC)
    aggregate = pynvml.nvmlDeviceGetTotalEccErrors(handle, pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                                   pynvml.NVML_AGGREGATE_ECC)
    fields = pynvml.nvmlDeviceGetFieldValues(handle, [FI_SBE_VOLATILE, FI_SBE_AGGREGATE])
    # The fields answer as the function does.
    assert [(f.nvmlReturn, f.value.ullVal) for f in fields] == [(0, volatile), (0, aggregate)], index
    return (pynvml.nvmlDeviceGetTotalEnergyConsumption(handle), volatile, aggregate,
            pynvml.nvmlDeviceGetNvLinkErrorCounter(handle, 0, pynvml.NVML_NVLINK_ERROR_DL_REPLAY),
            [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)],
            pynvml.nvmlDeviceGetMemoryInfo(handle).used)


def test_a_reset_starts_the_driver_counters_again_and_leaves_no_process() -> None:
    """Before: GPU 1 came back from its reset with the energy, NVLink and volatile ECC counts of before and
    the process that held it when it fell off the bus."""
    machine = FakeNvmlMachine(v100_sxm2_gpus(2))
    for gpu in machine.gpus:
        gpu.energy_mj, gpu.ecc_corrected, gpu.nvlink_counters = 5_000_000.0, 7, {(0, 0): 12}
        gpu.processes, gpu.mem_used_bytes = [FakeGpuProcess(4242 + gpu.index, 2**30)], 2**30
    machine.fail("gpu_lost", gpu=1)
    machine.heal("gpu_lost", gpu=1)  # nvidia-smi -r
    with serving(None, machine):
        pynvml.nvmlInit()
        try:
            reset, kept = _counters(1), _counters(0)
        finally:
            pynvml.nvmlShutdown()
    # The aggregate ECC count is the device's lifetime: the reset does not clear it.
    assert reset == (0, 0, 7, 0, [], IDLE_MEM_USED_BYTES)
    assert kept == (5_000_000, 7, 7, 12, [4242], 2**30)


def test_errors_counted_after_a_reset_add_to_the_aggregate_count() -> None:
    machine = FakeNvmlMachine(v100_sxm2_gpus(1))
    gpu = machine.gpus[0]
    gpu.ecc_corrected, gpu.ecc_uncorrected = 3, 1
    machine.fail("gpu_lost", gpu=0)
    machine.heal("gpu_lost", gpu=0)
    gpu.ecc_corrected = 2
    assert (gpu.ecc_count(True, False), gpu.ecc_count(True, True)) == (2, 5)
    assert (gpu.ecc_count(False, False), gpu.ecc_count(False, True)) == (0, 1)


def test_the_default_application_clocks_are_the_boards_own() -> None:
    """Before: NVML answered 877/1312 as the default of every board, whatever the GPU's own default."""
    gpus = v100_sxm2_gpus(2)
    gpus[1].default_app_clocks = (877, 1245)
    gpus[1].app_clock_graphics_mhz = 1245
    machine = FakeNvmlMachine(gpus)
    with serving(None, machine):
        pynvml.nvmlInit()
        try:
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 1)]
            defaults = [(pynvml.nvmlDeviceGetDefaultApplicationsClock(h, pynvml.NVML_CLOCK_MEM),
                         pynvml.nvmlDeviceGetDefaultApplicationsClock(h, pynvml.NVML_CLOCK_GRAPHICS)) for h in handles]
            pynvml.nvmlDeviceSetApplicationsClocks(handles[1], 877, 1245)
            at_default = gpus[1].app_clocks_set
            pynvml.nvmlDeviceSetApplicationsClocks(handles[1], 877, 1005)
            pynvml.nvmlDeviceResetApplicationsClocks(handles[1])
            after_reset = pynvml.nvmlDeviceGetApplicationsClock(handles[1], pynvml.NVML_CLOCK_GRAPHICS)
        finally:
            pynvml.nvmlShutdown()
    assert defaults == [DEFAULT_APP_CLOCKS, (877, 1245)]
    assert not at_default and after_reset == 1245  # its own default caps nothing
    gpus[1].app_clock_graphics_mhz, gpus[1].app_clocks_set = 1005, True
    machine.fail("gpu_lost", gpu=1)
    machine.heal("gpu_lost", gpu=1)
    assert (gpus[1].app_clock_mem_mhz, gpus[1].app_clock_graphics_mhz, gpus[1].app_clocks_set) == (877, 1245, False)
