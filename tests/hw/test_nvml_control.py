"""NVML writes for the guard through the real pynvml wrappers over the fake library: read-back, refusals, hangs."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.hw.nvml_control import ControlDenied, ControlFailed, NvmlHung, open_nvml_control
from rigmon.hw.root import HostRoot
from rigmon.sim.nvml import FakeNvmlMachine, serving, v100_sxm2_gpus


@pytest.fixture
def machine() -> FakeNvmlMachine:
    return FakeNvmlMachine(v100_sxm2_gpus(4))


def test_set_and_reset_app_clocks_read_back(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    with serving(tmp_path, machine):
        control = open_nvml_control(HostRoot(str(tmp_path)), timeout_s=2.0)
        try:
            before = control.read(2)
            assert (before.app_clock_mem_mhz, before.app_clock_graphics_mhz) == (877, 1312)
            assert (before.power_limit_min_mw, before.power_limit_max_mw) == (150_000, 300_000)
            supported = control.supported_clocks(2)
            assert list(supported) == [877] and 1530 in supported[877] and 1005 in supported[877]
            after = control.set_app_clocks(2, 877, 1005)
            assert (after.app_clock_mem_mhz, after.app_clock_graphics_mhz) == (877, 1005)
            assert machine.gpus[2].app_clocks_set and not machine.gpus[1].app_clocks_set
            control.set_locked_clocks(2, 135, 1005)
            assert machine.gpus[2].locked_clock_max_mhz == 1005
            assert control.set_power_limit(2, 200_000).power_limit_mw == 200_000
            control.set_persistence(2, True)
            assert control.read(2).persistence is True
            control.reset_locked_clocks(2)
            reset = control.reset_app_clocks(2)
            assert (reset.app_clock_graphics_mhz, machine.gpus[2].locked_clock_max_mhz) == (1312, None)
            with pytest.raises(ControlFailed):
                control.set_app_clocks(2, 877, 1006)  # not a supported clock
            with pytest.raises(ControlFailed):
                control.set_power_limit(2, 100_000)  # below the constraints
            assert control.probe() is None
        finally:
            control.close()


def test_no_permission_is_control_denied_and_probe_says_so(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    machine.no_permission = True
    with serving(tmp_path, machine):
        control = open_nvml_control(HostRoot(str(tmp_path)))
        try:
            with pytest.raises(ControlDenied, match="root"):
                control.set_app_clocks(0, 877, 1005)
            assert machine.gpus[0].app_clock_graphics_mhz == 1312
            reason = control.probe()
            assert reason is not None and "permission" in reason
        finally:
            control.close()


def test_a_hung_call_times_out_and_later_calls_fail_fast(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    with serving(tmp_path, machine):
        control = open_nvml_control(HostRoot(str(tmp_path)), timeout_s=0.2)
        try:
            assert control.device_count() == 4
            machine.fail("hang")
            with pytest.raises(NvmlHung):
                control.set_app_clocks(0, 877, 1005)
            with pytest.raises(NvmlHung, match="has not returned"):
                control.read(0)
            machine.heal("hang")
        finally:
            control.close()
