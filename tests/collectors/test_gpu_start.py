"""GPU collectors while NVML starts: a slow first nvmlInit (no persistence mode) is "starting" (CollectorStarting:
the agent's ``pending``), not "hung" and not "absent"."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from rigmon.collectors.base import CollectorHung, CollectorStarting, EventDraft
from rigmon.collectors.gpu import GpuCollector
from rigmon.collectors.gpu_processes import GpuProcessCollector
from rigmon.hw.nvml import NvmlHung, Watchdog, open_nvml, open_nvml_processes
from rigmon.hw.root import HostRoot
from rigmon.schema import GpuReading
from rigmon.sim.nvml import FakeNvmlMachine, serving
from tests.collectors.gpu_helpers import DEADLINE_S, StepClock, gpu_node_tree

T = TypeVar("T")

#: The NVML watchdog's timeout in these tests: the init takes longer than this.
TIMEOUT_S = 0.2


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[Path, FakeNvmlMachine]]:
    machine = gpu_node_tree(tmp_path, ("1a", "1b"))
    with serving(tmp_path, machine):
        yield tmp_path, machine


def test_a_slow_first_nvml_init_is_starting_not_hung(node: tuple[Path, FakeNvmlMachine]) -> None:
    """nvmlInit takes longer than a poll may wait (the driver brings the GPUs up first): the polls
    meanwhile say NVML is starting (not yet known: neither absent nor failing); once it returns the GPUs are read."""
    root, machine = node
    host = HostRoot(root)
    collector = GpuCollector(open_nvml(host, timeout_s=TIMEOUT_S), host, StepClock(), event_wait_s=0.05)
    machine.fail("hang", symbols=["nvmlInitWithFlags"])
    try:
        polls = []
        for _ in range(2):
            with pytest.raises(CollectorStarting) as starting:
                collector.collect()
            polls.append(str(starting.value))
        machine.heal("hang")
        gpus = [r for r in _once_started(collector, machine) if isinstance(r, GpuReading)]
    finally:
        machine.heal("hang")
        collector.close()
    assert all(p.startswith("NVML starting: nvmlInit has not returned for ") for p in polls), polls
    assert "persistence mode" in polls[0]
    assert [g.state for g in gpus] == ["ok", "ok"]


def _once_started(collector: GpuCollector, machine: FakeNvmlMachine) -> list[object]:
    """The GPUs of the first poll that reads them, after the init returned (a poll in the moment the
    init's job ends may still say starting, never hung)."""
    end = time.monotonic() + DEADLINE_S
    while True:
        try:
            return list(collector.collect())
        except CollectorStarting as exc:
            assert str(exc).startswith("NVML starting: ") and time.monotonic() < end, exc
            time.sleep(0.01)


def test_an_nvml_init_that_outlasts_its_budget_is_hung(node: tuple[Path, FakeNvmlMachine]) -> None:
    root, machine = node
    host = HostRoot(root)
    nvml = open_nvml(host, timeout_s=TIMEOUT_S)
    nvml.binding.init_timeout_s = 0.0  # no time for an init at all
    collector = GpuCollector(nvml, host, StepClock(), event_wait_s=0.05)
    machine.fail("hang", symbols=["nvmlInitWithFlags"])
    try:
        with pytest.raises(CollectorHung) as hung:
            collector.collect()
    finally:
        machine.heal("hang")
        collector.close()
    assert "nvmlInit has not returned" in str(hung.value)


class StoppableClock:
    """The monotonic clock, plus the time the test says the process was stopped (SIGSTOP, a paused VM)."""

    def __init__(self) -> None:
        self.stopped_s = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.stopped_s


def test_a_stop_of_the_agent_during_a_slow_init_does_not_use_up_its_budget(
        node: tuple[Path, FakeNvmlMachine]) -> None:
    """The agent stopped for far longer than the init's budget while nvmlInit runs: on resume its GPUs are
    still starting, not hung (the guard would have been told it cannot act); the stop counts as a
    moment of running time at most."""
    root, machine = node
    host = HostRoot(root)
    nvml = open_nvml(host, timeout_s=TIMEOUT_S)
    clock = StoppableClock()
    nvml.binding.clock = clock
    nvml.binding.init_timeout_s = 30.0
    collector = GpuCollector(nvml, host, StepClock(), event_wait_s=0.05)
    machine.fail("hang", symbols=["nvmlInitWithFlags"])
    try:
        with pytest.raises(CollectorStarting):
            collector.collect()
        clock.stopped_s += 10 * nvml.binding.init_timeout_s
        with pytest.raises(CollectorStarting) as starting:
            collector.collect()
        machine.heal("hang")
        gpus = [r for r in _once_started(collector, machine) if isinstance(r, GpuReading)]
    finally:
        machine.heal("hang")
        collector.close()
    waited = re.search(r"nvmlInit has not returned for ([0-9.]+) s", str(starting.value))
    assert waited is not None and float(waited[1]) < nvml.binding.init_timeout_s, starting.value
    assert [g.state for g in gpus] == ["ok", "ok"]


def test_the_process_collector_is_starting_too(node: tuple[Path, FakeNvmlMachine]) -> None:
    root, machine = node
    host = HostRoot(root)
    collector = GpuProcessCollector(open_nvml_processes(host, timeout_s=TIMEOUT_S), host, StepClock())
    machine.fail("hang", symbols=["nvmlInitWithFlags"])
    try:
        with pytest.raises(CollectorStarting) as starting:
            collector.collect()
    finally:
        machine.heal("hang")
        collector.close()
    assert str(starting.value).startswith("NVML starting: ")


def test_the_xid_wait_behind_a_slow_first_init_is_not_reported_stuck(node: tuple[Path, FakeNvmlMachine]) -> None:
    """The Xid thread's first wait registers the event set, which waits for nvmlInit too: the time
    it spent there is the init's (the polls said "starting"), not a wait stuck in the driver."""
    root, machine = node
    host = HostRoot(root)
    collector = GpuCollector(open_nvml(host, timeout_s=TIMEOUT_S), host, StepClock(), event_wait_s=0.05,
                             hung_after_s=TIMEOUT_S)
    machine.fail("hang", symbols=["nvmlInitWithFlags"])
    collector.start(lambda records: None)
    try:
        for _ in range(4):  # the init outlasts the wait's timeout and its watchdog several times
            with pytest.raises(CollectorStarting):
                collector.collect()
            time.sleep(TIMEOUT_S)
        machine.heal("hang")
        records = _once_started(collector, machine) + list(collector.collect())
        events = [r for r in records if isinstance(r, EventDraft)]
    finally:
        machine.heal("hang")
        collector.close()
    assert [e.kind for e in events] == []


class _TimedWatchdog(Watchdog):
    """The poll watchdog, noting the time each call is given."""

    def __init__(self, target: str | None) -> None:
        super().__init__("poll", target)
        self.timeouts_s: list[float] = []

    def run(self, fn: Callable[[], T], timeout_s: float) -> T:
        self.timeouts_s.append(timeout_s)
        return super().run(fn, timeout_s)


def test_the_first_poll_of_every_gpu_has_the_time_of_every_gpu(tmp_path: Path) -> None:
    """A poll of every GPU may take the NVML timeout for each GPU; the first one too, which reads every GPU's
    facts besides (it had one GPU's time: at the start of a loaded node with four GPUs it overran it and the
    collector was hung for a poll, then recovered)."""
    machine = gpu_node_tree(tmp_path, ("1a", "1b", "1c", "1d"))
    host = HostRoot(tmp_path)
    with serving(tmp_path, machine):
        nvml = open_nvml(host, timeout_s=TIMEOUT_S)
        watchdog = nvml.binding._poll = _TimedWatchdog(nvml.binding.target)
        collector = GpuCollector(nvml, host, StepClock(), event_wait_s=0.05)
        try:
            first = [r for r in collector.collect() if isinstance(r, GpuReading)]
            polls = len(watchdog.timeouts_s)
            collector.collect()
        finally:
            collector.close()
    assert [g.state for g in first] == ["ok"] * 4
    # The init and the count each alone, then the reads of the four GPUs; the next poll reads alone.
    assert watchdog.timeouts_s[:polls] == [TIMEOUT_S, TIMEOUT_S, 4 * TIMEOUT_S]
    assert watchdog.timeouts_s[polls:polls + 1] == [4 * TIMEOUT_S]


class _InitReturnsAsItsPollGivesUp(Watchdog):
    """The poll watchdog, where the nvmlInit it gave up on returns before the binding looks at what
    it gave up on (a race a loaded machine hits now and then: the init took its budget and a moment)."""

    def __init__(self, target: str | None, machine: FakeNvmlMachine) -> None:
        super().__init__("poll", target)
        self.machine = machine

    def run(self, fn: Callable[[], T], timeout_s: float) -> T:
        try:
            return super().run(fn, timeout_s)
        except NvmlHung:
            self.machine.heal("hang")
            end = time.monotonic() + DEADLINE_S
            while self.stuck and time.monotonic() < end:
                time.sleep(0.001)
            raise


def test_an_nvml_init_that_returns_as_its_poll_gives_up_is_starting_not_hung(
        node: tuple[Path, FakeNvmlMachine]) -> None:
    """An init that returns just after the poll's watchdog gave up on it is an init that overran: the
    poll says starting (it said hung: the GPU collector failed at the start, then recovered)."""
    root, machine = node
    host = HostRoot(root)
    nvml = open_nvml(host, timeout_s=TIMEOUT_S)
    nvml.binding._poll = _InitReturnsAsItsPollGivesUp(nvml.binding.target, machine)
    collector = GpuCollector(nvml, host, StepClock(), event_wait_s=0.05)
    machine.fail("hang", symbols=["nvmlInitWithFlags"])
    try:
        with pytest.raises(CollectorStarting, match="nvmlInit has returned"):
            collector.collect()
        gpus = [r for r in _once_started(collector, machine) if isinstance(r, GpuReading)]
    finally:
        machine.heal("hang")
        collector.close()
    assert [g.state for g in gpus] == ["ok", "ok"]


def test_a_read_that_hangs_after_a_slow_init_is_hung_not_starting(node: tuple[Path, FakeNvmlMachine]) -> None:
    """After an init that overran, a read stuck in the driver is a hang: the polls said "nvmlInit has
    returned" for as long as it stayed stuck (no poll answered, which was what ended "starting")."""
    root, machine = node
    host = HostRoot(root)
    collector = GpuCollector(open_nvml(host, timeout_s=TIMEOUT_S), host, StepClock(), event_wait_s=0.05)
    machine.fail("hang", symbols=["nvmlInitWithFlags"])
    try:
        with pytest.raises(CollectorStarting):
            collector.collect()
        machine.heal("hang")
        machine.fail("hang", symbols=["nvmlDeviceGetPowerUsage"])
        end = time.monotonic() + DEADLINE_S
        while True:
            try:
                collector.collect()
            except CollectorStarting as exc:
                assert time.monotonic() < end, exc
                time.sleep(0.01)
                continue
            except CollectorHung as exc:
                hung = str(exc)
                break
    finally:
        machine.heal("hang")
        collector.close()
    assert "NVML call" in hung


class _LateToRun(Watchdog):
    """The poll watchdog, whose thread does not get to run its first call until `go` is set (a loaded machine)."""

    def __init__(self, target: str | None) -> None:
        super().__init__("poll", target)
        self.go = threading.Event()

    def _serve(self) -> None:
        self.go.wait(DEADLINE_S)
        super()._serve()


def test_an_nvml_init_whose_job_has_not_begun_when_its_poll_gives_up_is_starting(
        node: tuple[Path, FakeNvmlMachine]) -> None:
    """The watchdog's thread did not get to begin the init before the first poll gave up on it: NVML is
    starting, not hung (it said hung: the GPU collector failed at the start, then recovered)."""
    root, machine = node
    host = HostRoot(root)
    nvml = open_nvml(host, timeout_s=TIMEOUT_S)
    watchdog = nvml.binding._poll = _LateToRun(nvml.binding.target)
    collector = GpuCollector(nvml, host, StepClock(), event_wait_s=0.05)
    try:
        with pytest.raises(CollectorStarting, match="nvmlInit has not returned"):
            collector.collect()
        watchdog.go.set()
        gpus = [r for r in _once_started(collector, machine) if isinstance(r, GpuReading)]
    finally:
        watchdog.go.set()
        collector.close()
    assert [g.state for g in gpus] == ["ok", "ok"]
