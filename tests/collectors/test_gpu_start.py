"""GPU collectors while NVML starts: a slow first nvmlInit (no persistence mode) is "starting", not "hung"."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rigmon.collectors.base import CollectorHung, NoData
from rigmon.collectors.gpu import GpuCollector
from rigmon.collectors.gpu_processes import GpuProcessCollector
from rigmon.hw.nvml import open_nvml, open_nvml_processes
from rigmon.hw.root import HostRoot
from rigmon.schema import GpuReading
from rigmon.sim.nvml import FakeNvmlMachine, serving, v100_sxm2_gpus
from rigmon.sim.tree import write_tree

#: The NVML watchdog's timeout in these tests: the init takes longer than this.
TIMEOUT_S = 0.2
DEADLINE_S = 10.0


class _Clock:
    def time(self) -> float:
        return 1_700_000_000.0

    def monotonic(self) -> float:
        return 0.0


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[Path, FakeNvmlMachine]]:
    files: dict[str, str] = {"/dev/kmsg": "6,1,1000000,-;Linux version 6.8.0\n"}
    for bus in ("1a", "1b"):
        files[f"/sys/bus/pci/devices/0000:{bus}:00.0/vendor"] = "0x10de\n"
        files[f"/sys/bus/pci/devices/0000:{bus}:00.0/class"] = "0x030200\n"
    write_tree(tmp_path, files)
    machine = FakeNvmlMachine(v100_sxm2_gpus(2))
    with serving(tmp_path, machine):
        yield tmp_path, machine


def test_a_slow_first_nvml_init_is_starting_not_hung(node: tuple[Path, FakeNvmlMachine]) -> None:
    """nvmlInit takes longer than a poll may wait (the driver brings the GPUs up first): the polls
    meanwhile say NVML is starting, quietly; once it returns the GPUs are read."""
    root, machine = node
    host = HostRoot(root)
    collector = GpuCollector(open_nvml(host, timeout_s=TIMEOUT_S), host, _Clock(), event_wait_s=0.05)
    machine.fail("hang", symbols=["nvmlInitWithFlags"])
    try:
        polls = []
        for _ in range(2):
            with pytest.raises(NoData) as starting:
                collector.collect()
            polls.append(str(starting.value))
        machine.heal("hang")
        gpus = _once_started(collector, machine)
    finally:
        machine.heal("hang")
        collector.close()
    assert all(p.startswith("NVML starting: nvmlInit has not returned for ") for p in polls), polls
    assert "persistence mode" in polls[0]
    assert [g.state for g in gpus] == ["ok", "ok"]


def _once_started(collector: GpuCollector, machine: FakeNvmlMachine) -> list[GpuReading]:
    """The GPUs of the first poll that reads them, after the init returned (a poll in the moment the
    init's job ends may still say starting, never hung)."""
    end = time.monotonic() + DEADLINE_S
    while True:
        try:
            return [r for r in collector.collect() if isinstance(r, GpuReading)]
        except NoData as exc:
            assert str(exc).startswith("NVML starting: ") and time.monotonic() < end, exc
            time.sleep(0.01)


def test_an_nvml_init_that_outlasts_its_budget_is_hung(node: tuple[Path, FakeNvmlMachine]) -> None:
    root, machine = node
    host = HostRoot(root)
    nvml = open_nvml(host, timeout_s=TIMEOUT_S)
    nvml.binding.init_timeout_s = 0.0  # no time for an init at all
    collector = GpuCollector(nvml, host, _Clock(), event_wait_s=0.05)
    machine.fail("hang", symbols=["nvmlInitWithFlags"])
    try:
        with pytest.raises(CollectorHung) as hung:
            collector.collect()
    finally:
        machine.heal("hang")
        collector.close()
    assert "nvmlInit has not returned" in str(hung.value)


def test_the_process_collector_is_starting_too(node: tuple[Path, FakeNvmlMachine]) -> None:
    root, machine = node
    host = HostRoot(root)
    collector = GpuProcessCollector(open_nvml_processes(host, timeout_s=TIMEOUT_S), host, _Clock())
    machine.fail("hang", symbols=["nvmlInitWithFlags"])
    try:
        with pytest.raises(NoData) as starting:
            collector.collect()
    finally:
        machine.heal("hang")
        collector.close()
    assert str(starting.value).startswith("NVML starting: ")
