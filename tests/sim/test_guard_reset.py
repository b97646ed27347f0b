"""A simulated GPU reset (healing ``gpu_lost``) does what the hardware does to the settings the guard writes:
application clocks back to their defaults, locked clocks gone, the power limit at the board's default,
persistence mode (the driver's) as it was. Read and written through the real pynvml wrappers."""

from __future__ import annotations

from pathlib import Path

from rigmon.hw.nvml_control import open_nvml_control
from rigmon.hw.root import HostRoot
from rigmon.sim.gpu import graphics_cap_mhz
from rigmon.sim.nvml import FakeNvmlMachine, serving, v100_sxm2_gpus


def test_a_reset_puts_the_boards_defaults_back(tmp_path: Path) -> None:
    machine = FakeNvmlMachine(v100_sxm2_gpus(2))
    with serving(tmp_path / "root", machine):
        control = open_nvml_control(HostRoot(str(tmp_path / "root")), timeout_s=5.0)
        try:
            for index in (0, 1):
                control.set_persistence(index, True)
                control.set_app_clocks(index, 877, 1005)
                control.set_locked_clocks(index, 135, 1005)
                control.set_power_limit(index, 200_000)
            machine.fail("gpu_lost", gpu=1)
            machine.heal("gpu_lost", gpu=1)  # nvidia-smi -r: the GPU answers again
            capped, reset = control.read(0), control.read(1)
        finally:
            control.close()
    assert (capped.app_clock_mem_mhz, capped.app_clock_graphics_mhz, capped.power_limit_mw) == (877, 1005, 200_000)
    assert (reset.app_clock_mem_mhz, reset.app_clock_graphics_mhz, reset.power_limit_mw) == (877, 1312, 300_000)
    assert reset.persistence is True  # the driver's setting outlives the board's reset
    assert machine.gpus[1].enforced_limit_mw == 300_000 and machine.gpus[1].locked_clock_max_mhz is None
    # The simulated power follows: the reset GPU may boost to its maximum again, the other stays capped.
    assert (graphics_cap_mhz(machine.gpus[0]), graphics_cap_mhz(machine.gpus[1])) == (1005, 1530)


def test_healing_a_gpu_that_was_not_lost_changes_nothing(tmp_path: Path) -> None:
    machine = FakeNvmlMachine(v100_sxm2_gpus(1))
    gpu = machine.gpus[0]
    gpu.app_clock_graphics_mhz, gpu.app_clocks_set, gpu.power_limit_mw = 1005, True, 200_000
    machine.heal("gpu_lost", gpu=0)
    assert (gpu.app_clock_graphics_mhz, gpu.app_clocks_set, gpu.power_limit_mw) == (1005, True, 200_000)
