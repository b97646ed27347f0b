"""A collector that is starting (NVML's slow first init) is ``pending`` with its message: not yet
known, neither failing nor absent, in the agent's frames, its alarms and ``rigmon check``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from rigmon.agent.check import STARTING_WAIT_S, GuardAccess, run_check
from rigmon.agent.check_format import format_report
from rigmon.agent.collector_threads import call_collector
from rigmon.agent.sampler import Sampler
from rigmon.alarms.engine import AlarmEngine
from rigmon.alarms.rule_config import rules_from_config
from rigmon.clock import SystemClock
from rigmon.collectors.base import CollectorHung, CollectorStarting, PolledCollector
from rigmon.collectors.gpu import GpuCollector
from rigmon.config import AgentConfig, AgentSection, AlarmsSection
from rigmon.hw.nvml import INIT_TIMEOUT_S, open_nvml
from rigmon.hw.root import HostRoot
from rigmon.schema import Frame
from rigmon.sim.nvml import FakeNvmlMachine, serving, v100_sxm2_gpus
from rigmon.sim.tree import write_tree

#: The NVML watchdog's timeout here: the hung init takes longer than this.
NVML_TIMEOUT_S = 0.2


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


def gpu_collector(root: Path) -> GpuCollector:
    host = HostRoot(root)
    return GpuCollector(open_nvml(host, timeout_s=NVML_TIMEOUT_S), host, SystemClock(), event_wait_s=0.05)


def test_a_starting_collector_is_pending_with_its_message() -> None:
    class Starting(PolledCollector):
        name = "slow"

        def collect(self) -> Sequence[object]:
            raise CollectorStarting("NVML starting: nvmlInit has not returned for 3.0 s")

    assert call_collector(Starting()) == ("pending", "NVML starting: nvmlInit has not returned for 3.0 s")


async def test_the_agent_says_gpus_are_starting_while_nvml_init_runs(node: tuple[Path, FakeNvmlMachine]) -> None:
    """Frames say ``pending`` with NVML's message while the first init hangs, the collector rules
    stay quiet, no collector_failed event; once the init returns the GPUs are read."""
    root, machine = node
    machine.fail("hang", symbols=["nvmlInitWithFlags"])
    collector = gpu_collector(root)
    sampler = Sampler("n", "run", {"gpu": collector}, interval_s=0.05, timeout_s=5, clock=SystemClock())
    engine = AlarmEngine(rules_from_config(AlarmsSection(), ["gpu", "psu"]), "n", SystemClock())
    frames: list[Frame] = []
    alarms: set[str] = set()

    def judge(frame: Frame) -> None:
        engine.evaluate(frame)
        alarms.update(a.rule for a in engine.active())

    sampler.add_judge(judge)
    sampler.add_listener(frames.append)
    task = asyncio.create_task(sampler.run())
    try:
        for _ in range(1000):
            said = [f.collectors["gpu"] for f in frames]
            if sum(1 for s in said if s.state == "pending" and s.error) >= 3:
                machine.heal("hang")
            if said and said[-1].state == "ok":
                break
            await asyncio.sleep(0.01)
    finally:
        machine.heal("hang")
        sampler.stop()
        await asyncio.wait_for(task, 5)
    statuses = [f.collectors["gpu"] for f in frames]
    assert statuses[-1].state == "ok" and frames[-1].readings.gpus, statuses[-1]
    starting = [s for s in statuses if s.error and s.error.startswith("NVML starting: ")]
    assert starting and all(s.state == "pending" and not s.ok for s in starting), starting
    assert {s.state for s in statuses} <= {"pending", "ok"}
    assert not [e.kind for f in frames for e in f.events if e.kind.startswith("collector_")]
    assert not {a for a in alarms if a.startswith("collector_")}


async def test_a_failure_then_starting_still_recovers_once() -> None:
    """hung (an init past its budget), then starting (the init has just returned), then ok: the
    collector_failed event gets its collector_recovered, once."""
    outcomes: list[Exception | None] = [CollectorHung("nvmlInit has not returned for 60.0 s"),
                                        CollectorStarting("NVML starting: nvmlInit has returned"),
                                        CollectorHung("nvmlInit has not returned for 61.0 s"),
                                        CollectorStarting("NVML starting: nvmlInit has returned")]

    class Driver(PolledCollector):
        name = "gpu"

        def collect(self) -> Sequence[object]:
            if outcomes:
                error = outcomes.pop(0)
                if error is not None:
                    raise error
            return []

    sampler = Sampler("n", "run", {"gpu": Driver()}, interval_s=0.02, timeout_s=5, clock=SystemClock())
    frames: list[Frame] = []
    sampler.add_listener(frames.append)
    task = asyncio.create_task(sampler.run())
    try:
        for _ in range(500):
            if not outcomes and frames and frames[-1].collectors["gpu"].state == "ok":
                break
            await asyncio.sleep(0.01)
    finally:
        sampler.stop()
        await asyncio.wait_for(task, 5)
    assert frames[-1].collectors["gpu"].state == "ok"
    kinds = [e.kind for f in frames for e in f.events if e.kind.startswith("collector_")]
    assert kinds == ["collector_failed", "collector_recovered"]


def _config(root: Path) -> AgentConfig:
    return AgentConfig(agent=AgentSection(node="n1", root=str(root)))


def test_check_waits_for_gpus_that_are_starting(node: tuple[Path, FakeNvmlMachine]) -> None:
    """`rigmon check` on a box whose nvmlInit is slow: not "gpu absent" and a pass, but the GPUs
    read once the init returned."""
    root, machine = node
    machine.fail("hang", symbols=["nvmlInitWithFlags"])
    pauses: list[float] = []

    def sleep(s: float) -> None:
        pauses.append(s)
        if len(pauses) == 3:
            machine.heal("hang")

    try:
        report = run_check(_config(root), SystemClock(), collectors={"gpu": gpu_collector(root)}, sleep=sleep,
                           guard_probe=GuardAccess)
    finally:
        machine.heal("hang")
    assert report.collectors["gpu"].state == "ok", report.collectors["gpu"]
    assert not [a for a in report.findings if a.rule == "collector_starting"]
    assert [n for n in report.notes if n.startswith("gpu: read after waiting ")], report.notes


def test_check_says_gpus_not_checked_while_nvml_still_starts(node: tuple[Path, FakeNvmlMachine]) -> None:
    root, machine = node
    machine.fail("hang", symbols=["nvmlInitWithFlags"])
    try:
        report = run_check(_config(root), SystemClock(), collectors={"gpu": gpu_collector(root)},
                           sleep=lambda s: None, guard_probe=GuardAccess, starting_wait_s=0.5)
    finally:
        machine.heal("hang")
    gpu = report.collectors["gpu"]
    assert (gpu.state, gpu.ok) == ("pending", False) and gpu.error and gpu.error.startswith("NVML starting: ")
    assert (report.status, report.exit_code) == ("warning", 1)
    assert [(a.rule, a.subject) for a in report.findings] == [("collector_starting", "collector:gpu")]
    assert "still starting" in report.findings[0].message and "not checked" in report.findings[0].message
    assert "  gpu  pending " in format_report(report)


def test_check_waits_longer_than_nvml_gives_its_init() -> None:
    assert STARTING_WAIT_S > INIT_TIMEOUT_S


class SteppedClock:
    """Monotonic seconds that move only when the check pauses."""

    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


class StartsAfter(PolledCollector):
    """Starting (NVML's first init) for its first ``calls`` collections, then read."""

    name = "slow"

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.collected = 0

    def collect(self) -> Sequence[object]:
        self.collected += 1
        if self.collected <= self.calls:
            raise CollectorStarting("NVML starting: nvmlInit has not returned yet")
        return []


def test_check_stopped_with_ctrl_z_does_not_use_up_its_wait_for_starting_collectors(tmp_path: Path) -> None:
    """The wait counts running time, as NVML's init budget does: a check stopped (^Z) for an hour in
    one of its pauses still gives the collector its passes, and it reads."""
    clock = SteppedClock()
    pauses: list[float] = []

    def sleep(s: float) -> None:
        pauses.append(s)
        clock.now_s += 3600.0 if len(pauses) == 2 else s  # the second pause: stopped for an hour

    slow = StartsAfter(calls=4)
    report = run_check(_config(tmp_path), SystemClock(), collectors={"slow": slow}, sleep=sleep,
                       guard_probe=GuardAccess, starting_wait_s=3.0, monotonic=clock)
    assert slow.collected == 5
    assert report.collectors["slow"].state == "ok"
    assert not [a for a in report.findings if a.rule == "collector_starting"]


def test_check_counts_its_wait_for_starting_collectors_in_running_time(tmp_path: Path) -> None:
    clock = SteppedClock()

    def sleep(s: float) -> None:
        clock.now_s += s

    report = run_check(_config(tmp_path), SystemClock(), collectors={"slow": StartsAfter(calls=1000)}, sleep=sleep,
                       guard_probe=GuardAccess, starting_wait_s=3.0, monotonic=clock)
    (finding,) = report.findings
    assert finding.rule == "collector_starting" and "still starting after 3 s" in finding.message
