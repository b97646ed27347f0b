"""Helpers of the GPU collector tests: a step clock, a collector over the fake NVML, a node's GPUs on the
PCI bus and in the fake NVML."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from rigmon.collectors.base import EventDraft
from rigmon.collectors.gpu import GpuCollector
from rigmon.hw.nvml import open_nvml
from rigmon.hw.root import HostRoot
from rigmon.schema import GpuReading
from rigmon.sim.nvml import FakeNvmlMachine, serving, v100_sxm2_gpus
from rigmon.sim.tree import write_tree


DEADLINE_S = 10.0


class StepClock:
    """Wall and monotonic time that only move when a test says so."""

    def __init__(self) -> None:
        self.t_s = 0.0

    def time(self) -> float:
        return 1_700_000_000.0 + self.t_s

    def monotonic(self) -> float:
        return self.t_s


def _collector(root: Path, clock: StepClock | None = None, timeout_s: float = DEADLINE_S) -> GpuCollector:
    host = HostRoot(root)
    return GpuCollector(open_nvml(host, timeout_s=timeout_s), host, clock or StepClock(), event_wait_s=0.05)


def _split(records: list[object]) -> tuple[list[GpuReading], list[EventDraft]]:
    return ([r for r in records if isinstance(r, GpuReading)], [r for r in records if isinstance(r, EventDraft)])


GPU_BUSES = ("1a", "1b", "1c", "1d")


def gpu_node_tree(root: Path, buses: Sequence[str]) -> FakeNvmlMachine:
    """Write a node's tree below ``root``: a kernel log and an NVIDIA 3D controller on each PCI bus of
    ``buses``; returns a fake NVML machine of as many V100s (on those buses), not yet served."""
    files: dict[str, str] = {"/dev/kmsg": "6,1,1000000,-;Linux version 6.8.0\n"}
    for bus in buses:
        files[f"/sys/bus/pci/devices/0000:{bus}:00.0/vendor"] = "0x10de\n"
        files[f"/sys/bus/pci/devices/0000:{bus}:00.0/class"] = "0x030200\n"
    write_tree(root, files)
    return FakeNvmlMachine(v100_sxm2_gpus(len(buses)))


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[Path, FakeNvmlMachine]]:
    machine = gpu_node_tree(tmp_path, GPU_BUSES)
    with serving(tmp_path, machine):
        yield tmp_path, machine
