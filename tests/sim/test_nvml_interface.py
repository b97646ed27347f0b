"""The fake NVML's area modules build their symbols through the library's named interface, not its privates."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pynvml

from rigmon.sim.nvml import FAKE_NVML, FakeGpuProcess, FakeNvmlLibrary, serving
from rigmon.sim.nvml_machine import FakeNvmlMachine, v100_sxm2_gpus

REPO = Path(__file__).resolve().parents[2]
SIM = REPO / "rigmon" / "sim"
#: The modules that build `FakeNvmlLibrary`'s symbol table, per NVML area.
AREA_MODULES = ("nvml_control.py", "nvml_devices.py", "nvml_events.py", "nvml_fields.py", "nvml_processes.py")


def private_uses(path: Path) -> list[str]:
    """``lib._x`` and ``machine._x`` in a module: the library's or a machine's privates."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in ("lib", "machine") and node.attr.startswith("_"):
            found.append(f"{path.name}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_area_modules_use_no_privates_of_the_library_or_machine() -> None:
    assert [p.name for p in sorted(SIM.glob("nvml_*.py")) if "_symbols(lib" in p.read_text()] == list(AREA_MODULES)
    assert [use for name in AREA_MODULES for use in private_uses(SIM / name)] == []


def test_the_interface_is_public_and_documented() -> None:
    for name in ("system_call", "device_call", "scalar_symbol", "string_symbol", "clock_symbol", "next_event_set_id"):
        assert getattr(FakeNvmlLibrary, name).__doc__, name
    assert FakeNvmlMachine.event_sets.__doc__


def test_the_nvml_tests_use_no_privates_of_a_machine() -> None:
    modules = sorted((REPO / "tests" / "hw").glob("test_nvml*.py"))  # split by subject: every one is checked
    assert REPO / "tests" / "hw" / "test_nvml.py" in modules
    assert [use for path in modules for use in private_uses(path)] == []


def test_event_sets_show_what_a_client_registered_until_it_frees_the_set() -> None:
    machine = FakeNvmlMachine(v100_sxm2_gpus(4))
    assert machine.event_sets() == {}
    with machine.lock:
        machine.register_xid_events(7, 0)
        machine.register_xid_events(7, 2)
        machine.register_xid_events(8, 1)
    held = machine.event_sets()
    assert held == {7: frozenset({0, 2}), 8: frozenset({1})}
    with machine.lock:
        machine.register_xid_events(7, 3)
        machine.free_event_set(8)
    assert held == {7: frozenset({0, 2}), 8: frozenset({1})}  # a copy
    assert machine.event_sets() == {7: frozenset({0, 2, 3})}


def test_event_set_ids_are_unique_across_threads() -> None:
    ids: list[int] = []
    lock = threading.Lock()

    def take() -> None:
        mine = [FAKE_NVML.next_event_set_id() for _ in range(200)]
        with lock:
            ids.extend(mine)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == len(ids) == 800


def test_an_r470_driver_lists_processes_through_v2_only() -> None:
    """Drivers before R510 have no ``_v3`` process lists, only ``_v2``: pynvml's ``_v2`` wrappers read
    the fake's processes, its ``_v3`` ones answer FunctionNotFound, as on such a driver."""
    gpus = v100_sxm2_gpus(1)
    gpus[0].processes = [FakeGpuProcess(4242, 2**30), FakeGpuProcess(4243, None, kind="graphics")]
    machine = FakeNvmlMachine(gpus, driver_version="470.256.02", missing_symbols=[
        "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3"])
    with serving(None, machine):
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            compute = [(p.pid, p.usedGpuMemory) for p in pynvml.nvmlDeviceGetComputeRunningProcesses_v2(handle)]
            graphics = [(p.pid, p.usedGpuMemory) for p in pynvml.nvmlDeviceGetGraphicsRunningProcesses_v2(handle)]
            try:
                pynvml.nvmlDeviceGetComputeRunningProcesses_v3(handle)
            except pynvml.NVMLError as exc:
                missing = exc.value
        finally:
            pynvml.nvmlShutdown()
    assert compute == [(4242, 2**30)] and graphics == [(4243, None)]
    assert missing == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
