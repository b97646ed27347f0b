"""Fault matrix, NVML: the driver hangs, loses a GPU, or is not loaded. The agent stays up, says
so in the GPU collector's status and events, recovers when NVML does, and keeps every frame."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rigmon.schema import Frame
from rigmon.sim.nvml import FakeNvmlMachine, serving, v100_sxm2_gpus
from rigmon.sim.tree import write_tree
from tests.faults.harness import agent_config, only, running_agent, seqs_contiguous

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
    return agent_config(root, {"collectors": ONLY, "gpu": {"nvml_timeout_s": 0.2, "event_wait_s": 0.05},
                               "agent": {"state_dir": str(root / "state")}})


async def test_nvml_hang_is_reported_and_recovers(gpu_node: tuple[Path, FakeNvmlMachine]) -> None:
    root, machine = gpu_node
    async with running_agent(_config(root)) as h:  # type: ignore[arg-type]
        before = await h.wait_for(lambda f: _gpu_states(f) == ["ok"] * 4, "four GPUs")
        machine.fail("hang")
        hung = await h.wait_for(lambda f: f.collectors["gpu"].state == "hung", "the GPU collector hung")
        assert "no answer" in (hung.collectors["gpu"].error or "") or "NVML" in (hung.collectors["gpu"].error or "")
        # Everything else goes on: the host collector, frames, the API.
        await h.wait_for(lambda f: f.seq > hung.seq + 5 and f.collectors["host"].ok, "frames while hung")
        await h.api_alive()
        machine.heal("hang")
        await h.wait_for(lambda f: f.collectors["gpu"].state == "ok" and _gpu_states(f) == ["ok"] * 4, "recovery")
        kinds = [e.kind for e in h.events() if e.subject == "collector:gpu"]
        assert [k for k in kinds if k.startswith("collector_")] == ["collector_failed", "collector_recovered"], \
            [(e.kind, e.message) for e in h.events() if e.subject == "collector:gpu"]  # why, when it fails
        assert "alarm_firing" in kinds  # the shipped rules alarm on a hung collector, with no dashboard open
        assert seqs_contiguous(h.frames) and h.frames[0].seq == 1 and before in h.frames


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
