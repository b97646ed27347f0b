"""NVML process lists: one binding shared with the GPU poll, kept arrays that grow, R470's v2 lists."""

from __future__ import annotations

import threading
from pathlib import Path

import pynvml
import pytest

from rigmon.hw.nvml import PynvmlNvml, open_nvml
from rigmon.hw.root import HostRoot
from rigmon.sim.nvml import FakeNvmlMachine, serving, v100_sxm2_gpus
from tests.hw.nvml_helpers import DEADLINE_S


# -- one binding per machine -----------------------------------------------------------------


def test_the_gpu_and_process_seams_of_one_root_share_one_binding(tmp_path: Path, machine: FakeNvmlMachine,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from rigmon.hw.nvml import open_nvml_processes

    inits: list[str] = []
    real_init = pynvml.nvmlInit

    def counted_init() -> None:
        inits.append(threading.current_thread().name)
        real_init()

    monkeypatch.setattr(pynvml, "nvmlInit", counted_init)
    with serving(tmp_path, machine):
        gpu = open_nvml(HostRoot(tmp_path), timeout_s=DEADLINE_S)
        procs = open_nvml_processes(HostRoot(tmp_path), timeout_s=DEADLINE_S)
        try:
            assert len(gpu.read_devices({})) == 4
            uuids = machine.calls["nvmlDeviceGetUUID"]
            assert [p.uuid for p in procs.read_all_processes({})] == [g.uuid for g in machine.gpus]
            # The process poll takes handle and UUID from the GPU poll's plans.
            assert machine.calls["nvmlDeviceGetUUID"] == uuids
            pollers = [t for t in threading.enumerate() if t.name.startswith("rigmon-nvml-poll")]
            assert len(pollers) == 1 and len(inits) == 1
            gpu.close()
            gpu.close()  # a second close of one user changes nothing
            assert len(procs.read_all_processes({})) == 4  # the other user still reads
            assert machine.init_count == 1
        finally:
            procs.close()
        assert machine.init_count == 0  # the last user's close shut NVML down


def test_process_lists_are_read_into_kept_arrays_that_grow(machine: FakeNvmlMachine) -> None:
    from rigmon.hw.nvml.processes import FIRST_ROOM
    from rigmon.sim.nvml import FakeGpuProcess

    many = [FakeGpuProcess(pid=1000 + i, used_bytes=(i + 1) << 20) for i in range(FIRST_ROOM + 4)]
    machine.gpus[0].processes = [*many, FakeGpuProcess(pid=77, used_bytes=None, kind="graphics"),
                                 FakeGpuProcess(pid=1000, used_bytes=5 << 20, kind="graphics")]
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            first = nvml.read_all_processes({})
            calls = machine.calls["nvmlDeviceGetComputeRunningProcesses_v3"]
            second = nvml.read_all_processes({})
        finally:
            nvml.close()
    # GPU 0: the first array was too small (asked again, grown); GPUs 1-3 answer an empty list at once.
    assert calls == 2 + 3
    assert machine.calls["nvmlDeviceGetComputeRunningProcesses_v3"] == calls + 4  # grown array kept
    assert first == second
    procs = {p.pid: p for p in first[0].processes}
    assert len(procs) == FIRST_ROOM + 5 and first[0].listed and not first[0].lost
    assert procs[77].used_bytes is None and procs[77].kind == "graphics"
    assert procs[1000].kind == "compute" and procs[1000].used_bytes == 1 << 20  # in both lists: compute
    assert procs[1000 + FIRST_ROOM + 3].used_bytes == (FIRST_ROOM + 4) << 20
    assert first[1].listed and first[1].processes == ()


def test_an_r470_driver_s_processes_are_listed_through_v2() -> None:
    """R470-era drivers have no ``_v3`` process lists: the node listed no process at all, and
    `rigmon check`'s busy-GPU finding and the training view were blind on it."""
    from rigmon.sim.nvml import FakeGpuProcess

    machine = FakeNvmlMachine(v100_sxm2_gpus(1), driver_version="470.256.02", missing_symbols=[
        "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3"])
    machine.gpus[0].processes = [FakeGpuProcess(pid=4242, used_bytes=1 << 30),
                                 FakeGpuProcess(pid=77, used_bytes=None, kind="graphics")]
    with serving(None, machine):
        nvml = PynvmlNvml(None, timeout_s=DEADLINE_S)
        try:
            first = nvml.read_all_processes({})
            second = nvml.read_all_processes({})
        finally:
            nvml.close()
    assert first == second and first[0].listed
    assert {(p.pid, p.used_bytes, p.kind) for p in first[0].processes} == {(4242, 1 << 30, "compute"),
                                                                           (77, None, "graphics")}
    assert machine.calls["nvmlDeviceGetComputeRunningProcesses_v2"] == 2
