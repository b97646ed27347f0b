"""Fault matrix, NVML: the driver hangs, loses a GPU, or is not loaded. The agent stays up, says
so in the GPU collector's status and events, recovers when NVML does, and keeps every frame."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rigmon.schema import Event, Frame
from rigmon.sim.nvml import FakeNvmlMachine, serving, v100_sxm2_gpus
from rigmon.sim.tree import write_tree
from tests.faults.harness import (
    Harness,
    agent_config,
    only,
    running_agent,
    seqs_contiguous,
)

BUSES = ("1a", "1b", "1c", "1d")
ONLY = only("gpu", "host")


@pytest.fixture
def gpu_node(tmp_path: Path) -> Iterator[tuple[Path, FakeNvmlMachine]]:
    files = {"/dev/kmsg": "6,1,1000000,-;Linux version 6.8.0\n",
             "/proc/stat": "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"}
    for bus in BUSES:
        files[f"/sys/bus/pci/devices/0000:{bus}:00.0/vendor"] = "0x10de\n"
        files[f"/sys/bus/pci/devices/0000:{bus}:00.0/class"] = "0x030200\n"
    write_tree(tmp_path, files)
    machine = FakeNvmlMachine(v100_sxm2_gpus(4))
    with serving(tmp_path, machine):
        yield tmp_path, machine


def _gpu_states(frame: Frame) -> list[str]:
    return [g.state for g in frame.readings.gpus]


def _config(root: Path) -> object:
    # A hang is for NVML's watchdog to find (0.2 s a GPU, of the process's running time): the sampler's own
    # timeout is the harness's, the default 5 s (0.5 s, which a poll on a loaded machine passes now and then
    # in wall time, made a failure and recovery more, at the start or in the hang).
    return agent_config(root, {"collectors": ONLY, "gpu": {"nvml_timeout_s": 0.2, "event_wait_s": 0.05},
                               "agent": {"state_dir": str(root / "state")}})


async def _hang_and_heal(h: Harness, machine: FakeNvmlMachine) -> tuple[Frame, list[Event]]:
    """Hang NVML under a running agent whose GPUs answer, heal it once the agent has gone on for a while,
    wait for the GPUs again; the last frame before the hang, and the GPU collector's events from then on."""
    before = await h.wait_for(lambda f: _gpu_states(f) == ["ok"] * 4, "four GPUs")
    machine.fail("hang")
    hung = await h.wait_for(lambda f: f.collectors["gpu"].state == "hung", "the GPU collector hung")
    assert "no answer" in (hung.collectors["gpu"].error or "") or "NVML" in (hung.collectors["gpu"].error or "")
    # Everything else goes on: the host collector, frames, the API.
    await h.wait_for(lambda f: f.seq > hung.seq + 5 and f.collectors["host"].ok, "frames while hung")
    await h.api_alive()
    machine.heal("hang")
    await h.wait_for(lambda f: f.collectors["gpu"].state == "ok" and _gpu_states(f) == ["ok"] * 4, "recovery")
    return before, [e for f in h.frames if f.seq > before.seq for e in f.events if e.subject == "collector:gpu"]


def _transitions(events: list[Event]) -> list[str]:
    return [e.kind for e in events if e.kind.startswith("collector_")]


async def test_nvml_hang_is_reported_and_recovers(gpu_node: tuple[Path, FakeNvmlMachine]) -> None:
    root, machine = gpu_node
    async with running_agent(_config(root)) as h:  # type: ignore[arg-type]
        # Counted from the hang on: before it, a first poll that overran its timeout on a loaded machine
        # (CI: the whole suite on 2 cores) is a failure and recovery of its own.
        before, events = await _hang_and_heal(h, machine)
        assert _transitions(events) == ["collector_failed", "collector_recovered"], \
            [(e.kind, e.message) for e in events]  # why, when it fails
        # The shipped rules alarm on a hung collector, with no dashboard open: at the hang, or already at
        # such a slow first poll (the alarm then holds for 30 s and does not fire again at the hang).
        assert "alarm_firing" in [e.kind for e in h.events() if e.subject == "collector:gpu"]
        assert seqs_contiguous(h.frames) and h.frames[0].seq == 1 and before in h.frames


async def test_a_hang_after_an_earlier_failure_is_one_failure_and_one_recovery(
        gpu_node: tuple[Path, FakeNvmlMachine]) -> None:
    """The GPU collector failed and recovered before the hang (here its first poll stuck in the driver
    until healed; in CI a first poll slower than the collector timeout under load): that pair is reported,
    and the hang is one failure and one recovery more."""
    root, machine = gpu_node
    machine.fail("hang", symbols=["nvmlDeviceGetPowerUsage"])  # the polls' reads only: init and Xid answer
    async with running_agent(_config(root)) as h:  # type: ignore[arg-type]
        await h.wait_for(lambda f: f.collectors["gpu"].state == "hung", "the first poll hung")
        machine.heal("hang")
        _, events = await _hang_and_heal(h, machine)
        assert _transitions(events) == ["collector_failed", "collector_recovered"], \
            [(e.kind, e.message) for e in events]
        every = [e for e in h.events() if e.subject == "collector:gpu"]
        assert _transitions(every) == ["collector_failed", "collector_recovered"] * 2, \
            [(e.kind, e.message) for e in every]


async def test_gpu_lost_is_one_event_and_the_rest_keeps_reporting(gpu_node: tuple[Path, FakeNvmlMachine]) -> None:
    root, machine = gpu_node
    async with running_agent(_config(root)) as h:  # type: ignore[arg-type]
        await h.wait_for(lambda f: _gpu_states(f) == ["ok"] * 4, "four GPUs")
        machine.fail("gpu_lost", 2)
        lost = await h.wait_for(lambda f: _gpu_states(f) == ["ok", "ok", "lost", "ok"], "GPU 2 lost")
        assert lost.collectors["gpu"].ok and lost.readings.gpus[2].lost_reason == "NVML: GPU is lost"
        later = await h.wait_for(lambda f: f.seq > lost.seq + 10, "more frames")
        assert later.readings.gpus[0].power_w is not None and later.readings.gpus[2].power_w is None
        assert [e.subject for e in h.events("gpu_lost")] == ["gpu:2"]
        await h.api_alive()
        assert seqs_contiguous(h.frames)


async def test_driver_missing_is_absent_then_found(tmp_path: Path) -> None:
    write_tree(tmp_path, {"/proc/stat": "cpu  1 2 3 4 5 6 7 8 0 0\n", "/dev/kmsg": ""})
    machine = FakeNvmlMachine(v100_sxm2_gpus(2))
    machine.fail("driver_missing")
    with serving(tmp_path, machine):
        async with running_agent(_config(tmp_path)) as h:  # type: ignore[arg-type]
            absent = await h.wait_for(lambda f: f.collectors["gpu"].state == "absent", "no driver")
            assert absent.collectors["gpu"].ok and absent.readings.gpus == ()
            machine.heal("driver_missing")
            found = await h.wait_for(lambda f: _gpu_states(f) == ["ok", "ok"], "GPUs once the driver loads")
            assert found.collectors["gpu"].state == "ok"
            assert not h.events("collector_failed")
