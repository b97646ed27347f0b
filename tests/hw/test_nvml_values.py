"""Values NVML answers with success that are no readings: NVML_VALUE_NOT_AVAILABLE (all ones), an
unknown performance state, a utilisation past 100 %, and a garbled NVLink count. Each is missing
(``None``) for that value alone; the GPU and its other values read as usual."""

from __future__ import annotations

from collections import deque

from rigmon.hw.nvml import MAX_NVLINKS, POWER_SAMPLES_PER_CALL, NvmlDeviceData, PynvmlNvml
from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.hw.nvml_helpers import DEADLINE_S

U32 = 0xFFFFFFFF
U64 = 0xFFFFFFFFFFFFFFFF
PSTATE_UNKNOWN = 32


def read_once(machine: FakeNvmlMachine) -> list[NvmlDeviceData]:
    """One poll of every GPU of ``machine`` through the real pynvml binding."""
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            return nvml.read_devices({})
        finally:
            nvml.close()


def test_values_the_driver_has_not_got_are_missing(machine: FakeNvmlMachine) -> None:
    gpu = machine.gpus[0]
    gpu.power_mw, gpu.temp_c, gpu.enforced_limit_mw, gpu.pcie_gen = U32, U32, U32, U32
    gpu.clock_sm_mhz, gpu.clock_mem_mhz, gpu.app_clock_graphics_mhz = U32, U32, U32
    gpu.clock_reasons, gpu.ecc_corrected = U64, U64
    gpu.pstate, gpu.util_gpu_pct, gpu.util_mem_pct = PSTATE_UNKNOWN, U32, 101
    lost, fine = read_once(machine)[:2]
    assert not lost.lost
    assert (lost.power_mw, lost.power_instant_mw, lost.temp_c, lost.enforced_limit_mw, lost.pcie_gen) == (
        None, None, None, None, None)
    assert (lost.clock_sm_mhz, lost.clock_mem_mhz, lost.app_clock_graphics_mhz) == (None, None, None)
    assert (lost.clock_reasons, lost.ecc_corrected, lost.pstate) == (None, None, None)
    assert (lost.util_gpu_pct, lost.util_mem_pct) == (None, None)
    # What the driver did answer stays, on that GPU and the others.
    assert (lost.power_limit_mw, lost.clock_graphics_mhz, lost.pcie_width) == (300_000, 135, 16)
    assert (fine.power_mw, fine.temp_c, fine.pstate, fine.clock_reasons) == (42_000, 35, 8, 0x1)


def test_power_samples_without_a_value_are_dropped(machine: FakeNvmlMachine) -> None:
    samples = [(1_000 + i, U32 if i % 2 else 200_000 + i) for i in range(POWER_SAMPLES_PER_CALL)]
    samples += [(5_000, U32)] * 3 + [(6_000, 250_000)]
    machine.gpus[0].power_samples = deque(samples, maxlen=len(samples))
    data = read_once(machine)[0]
    kept = [(ts, mw) for ts, mw in samples if mw != U32]
    assert list(zip(data.power_samples_us, data.power_samples_mw, strict=True)) == kept
    assert max(data.power_samples_mw) == 250_000


def test_a_garbled_nvlink_count_is_not_believed(machine: FakeNvmlMachine) -> None:
    """A count past NVML_NVLINK_MAX_LINKS: the links are probed (6 on a V100-SXM2), not a field and a
    call per link asked for a thousand links on every poll."""
    machine.gpus[0].nvlink_count_answer = 1000
    data = read_once(machine)[0]
    assert [link.link for link in data.nvlinks] == list(range(6))
    assert machine.calls["nvmlDeviceGetNvLinkState"] <= MAX_NVLINKS
