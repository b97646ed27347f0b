"""NVML access: the fake library beneath the real pynvml, named failures, one error gate per field, per-root binding."""

from __future__ import annotations

import threading
from pathlib import Path

import pynvml
import pytest

from rigmon.hw.nvml import NvmlUnavailable, PynvmlNvml, open_nvml
from rigmon.hw.root import HostRoot
from rigmon.sim.nvml import FakeNvmlMachine, serving, v100_sxm2_gpus
from tests.hw.nvml_helpers import DEADLINE_S


# -- the fake at the library level: pynvml's own wrappers run ----------------------------


def test_pynvml_wrappers_read_the_fake(machine: FakeNvmlMachine) -> None:
    with serving(None, machine):
        pynvml.nvmlInit()
        try:
            assert pynvml.nvmlDeviceGetCount() == 4
            handle = pynvml.nvmlDeviceGetHandleByIndex(2)
            assert pynvml.nvmlDeviceGetName(handle) == "Tesla V100-SXM2-16GB"
            assert pynvml.nvmlDeviceGetPciInfo(handle).busId == "00000000:1C:00.0"
            assert pynvml.nvmlDeviceGetPowerManagementLimit(handle) == 300_000
            assert pynvml.nvmlDeviceGetMemoryInfo(handle).total == 16_945_512_448
            assert pynvml.nvmlSystemGetDriverVersion() == "535.183.01"
        finally:
            pynvml.nvmlShutdown()


def test_named_failure_not_supported(machine: FakeNvmlMachine) -> None:
    machine.fail("not_supported", 1, ["nvmlDeviceGetTotalEnergyConsumption"])
    with serving(None, machine):
        pynvml.nvmlInit()
        try:
            h1, h0 = pynvml.nvmlDeviceGetHandleByIndex(1), pynvml.nvmlDeviceGetHandleByIndex(0)
            with pytest.raises(pynvml.NVMLError_NotSupported):
                pynvml.nvmlDeviceGetTotalEnergyConsumption(h1)
            assert pynvml.nvmlDeviceGetTotalEnergyConsumption(h0) > 0
            # The V100-SXM2 profile is passively cooled: no fan on any GPU.
            with pytest.raises(pynvml.NVMLError_NotSupported):
                pynvml.nvmlDeviceGetFanSpeed(h0)
        finally:
            pynvml.nvmlShutdown()


def test_named_failure_gpu_lost_hits_only_that_gpu(machine: FakeNvmlMachine) -> None:
    with serving(None, machine):
        pynvml.nvmlInit()
        try:
            h3 = pynvml.nvmlDeviceGetHandleByIndex(3)
            machine.fail("gpu_lost", 3)
            with pytest.raises(pynvml.NVMLError_GpuIsLost):
                pynvml.nvmlDeviceGetPowerUsage(h3)
            with pytest.raises(pynvml.NVMLError_GpuIsLost):
                pynvml.nvmlDeviceGetHandleByIndex(3)
            assert pynvml.nvmlDeviceGetPowerUsage(pynvml.nvmlDeviceGetHandleByIndex(0)) == 42_000
            assert pynvml.nvmlDeviceGetCount() == 4  # the driver still counts it
        finally:
            pynvml.nvmlShutdown()


def test_named_failure_driver_missing(machine: FakeNvmlMachine) -> None:
    machine.fail("driver_missing")
    with serving(None, machine):
        with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
            pynvml.nvmlInit()


def test_named_failure_hang_blocks_until_healed(machine: FakeNvmlMachine) -> None:
    results: list[int] = []
    with serving(None, machine):
        pynvml.nvmlInit()
        try:
            machine.fail("hang")
            worker = threading.Thread(target=lambda: results.append(pynvml.nvmlDeviceGetCount()), daemon=True)
            worker.start()
            worker.join(0.2)
            assert worker.is_alive() and results == []
            machine.heal("hang")
            worker.join(DEADLINE_S)
            assert results == [4]
        finally:
            pynvml.nvmlShutdown()


def test_missing_symbol_is_function_not_found() -> None:
    machine = FakeNvmlMachine(v100_sxm2_gpus(1), missing_symbols=["nvmlDeviceGetCurrentClocksEventReasons"])
    with serving(None, machine):
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            with pytest.raises(pynvml.NVMLError_FunctionNotFound):
                pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
        finally:
            pynvml.nvmlShutdown()


def test_power_samples_newer_than_timestamp(machine: FakeNvmlMachine) -> None:
    machine.gpus[0].power_samples.extend([(100, 250_000), (200, 320_000), (300, 240_000)])
    with serving(None, machine):
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            _, samples = pynvml.nvmlDeviceGetSamples(handle, pynvml.NVML_TOTAL_POWER_SAMPLES, 100)
            assert [(s.timeStamp, s.sampleValue.uiVal) for s in samples] == [(200, 320_000), (300, 240_000)]
            with pytest.raises(pynvml.NVMLError_NotFound):
                pynvml.nvmlDeviceGetSamples(handle, pynvml.NVML_TOTAL_POWER_SAMPLES, 300)
        finally:
            pynvml.nvmlShutdown()


# -- hw.nvml: one error gate per field, lazy init -----------------------------------------


def test_read_device_maps_field_errors_to_none(machine: FakeNvmlMachine) -> None:
    machine.fail("not_supported", 0)
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            data = nvml.read_device(0, 0)
            other = nvml.read_device(1, 0)
        finally:
            nvml.close()
    assert not data.lost and data.name == "Tesla V100-SXM2-16GB"
    assert data.energy_mj is None and data.serial is None and data.nvlinks == ()
    assert data.fan_pct is None and other.fan_pct is None
    assert other.energy_mj is not None and len(other.nvlinks) == 6


def test_read_device_reports_lost(machine: FakeNvmlMachine) -> None:
    machine.fail("gpu_lost", 3)
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            assert nvml.device_count() == 4
            lost = nvml.read_device(3, 0)
        finally:
            nvml.close()
    assert lost.lost and lost.power_mw is None and lost.uuid is None


def test_driver_missing_is_unavailable(machine: FakeNvmlMachine) -> None:
    machine.fail("driver_missing")
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            with pytest.raises(NvmlUnavailable):
                nvml.device_count()
        finally:
            nvml.close()


def test_event_reasons_fall_back_to_throttle_reasons() -> None:
    machine = FakeNvmlMachine(v100_sxm2_gpus(1), missing_symbols=["nvmlDeviceGetCurrentClocksEventReasons"])
    machine.gpus[0].clock_reasons = 0x4
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            assert nvml.read_device(0, 0).clock_reasons == 0x4
        finally:
            nvml.close()


def test_each_root_gets_its_own_machine(tmp_path: Path) -> None:
    node_a, node_b, node_c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for d in (node_a, node_b, node_c):
        d.mkdir()
    two = FakeNvmlMachine(v100_sxm2_gpus(2, first_bus=0x3B))
    with serving(node_a, FakeNvmlMachine(v100_sxm2_gpus(4))), serving(node_b, two):
        nvmls = [open_nvml(HostRoot(d), timeout_s=DEADLINE_S) for d in (node_a, node_b, node_c)]
        try:
            assert nvmls[0].device_count() == 4
            assert nvmls[1].device_count() == 2
            assert nvmls[1].read_device(0, 0).pci_bus_id == "00000000:3B:00.0"
            with pytest.raises(NvmlUnavailable):
                nvmls[2].device_count()  # a node without NVIDIA GPUs
        finally:
            for nvml in nvmls:
                nvml.close()
