"""The simulated training job marks its checkpoints through the agent's API, as `rigmon mark` does."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import httpx

from rigmon.sim.job import SimDdpJob
from rigmon.sim.node import SimNode
from rigmon.sim.rig import running_rig
from rigmon.sim.scenarios.lab import HealthyV100
from rigmon.sim.tree import Tree
from tests.token_files import control_token_config

CONTROL_TOKEN = "sim-marks-control-token-0123456789"


def healthy_node(tmp_path: Path) -> tuple[SimNode, SimDdpJob]:
    node = SimNode(name="n1", tree=Tree(tmp_path / "n1"), rng=random.Random(1))
    HealthyV100().build(node, 0)
    job = next(d for d in node.devices if isinstance(d, SimDdpJob))
    return node, job


def test_the_job_marks_each_checkpoint_while_every_worker_runs(tmp_path: Path) -> None:
    node, job = healthy_node(tmp_path)
    every = job.checkpoint_every_s
    assert every
    try:
        node.step(job.start_s + 1.0)
        assert node.marks == []
        node.step(job.start_s + 2 * every + 1.0)  # two checkpoints due at once: both marked, in order
        assert node.marks == [("epoch 1 checkpoint", "bob"), ("epoch 2 checkpoint", "bob")]
        node.marks.clear()
        job.gpus.gpus[2].lost = True  # a rank gone: the others hang in their all-reduce
        for t_s in (2.5, 3.5, 5.5):
            node.step(job.start_s + t_s * every)
        assert node.marks == []
    finally:
        node.close()


async def test_marks_reach_the_agent_and_its_frames(tmp_path: Path) -> None:
    extra = control_token_config(tmp_path, CONTROL_TOKEN)
    # At speed 30 the first checkpoint (simulated 40 s) comes about 1.3 s into the run.
    async with running_rig("healthy-v100", 1, base_port=0, speed=30, workdir=tmp_path / "rig",
                           extra_config=extra) as rig:
        marks: list[tuple[str, str | None]] = []
        async with httpx.AsyncClient(timeout=10.0) as client:
            for _ in range(300):
                frame = (await client.get(f"{rig.urls[0]}/v1/latest")).json()
                marks += [(e["message"], e["data"].get("by")) for e in frame["events"] if e["kind"] == "mark"]
                if marks:
                    break
                await asyncio.sleep(0.1)
    assert marks and marks[0] == ("epoch 1 checkpoint", "bob")


async def test_without_a_control_token_no_mark_is_posted(tmp_path: Path) -> None:
    async with running_rig("healthy-v100", 1, base_port=0, speed=30, workdir=tmp_path / "rig") as rig:
        async with httpx.AsyncClient(timeout=10.0) as client:
            seen: list[str] = []
            for _ in range(40):
                frame = (await client.get(f"{rig.urls[0]}/v1/latest")).json()
                seen += [e["kind"] for e in frame["events"]]
                await asyncio.sleep(0.1)
        node = rig.rig.nodes[0]
        job = next(d for d in node.devices if isinstance(d, SimDdpJob))
        assert job._checkpoints >= 2  # checkpoints were due (simulated minutes went by)
        assert len(node.marks) <= 1  # taken and dropped as they come: the agent would refuse them
    assert "mark" not in seen


def test_a_worker_whose_gpu_is_reset_before_it_exits_stays_off_the_board(tmp_path: Path) -> None:
    # A lost GPU reset within the worker's exit delay: the reset cleared its process list, and the next
    # step put the dying worker back on it, as if it had survived the reset.
    node, job = healthy_node(tmp_path)
    gpu = job.gpus.gpus[2]
    try:
        node.step(job.start_s + 1.0)
        worker = next(p for p in job.processes if p.gpu_index == 2)
        assert [p.pid for p in gpu.processes] == [worker.pid]
        lost_at = job.start_s + 2.0
        job.gpus.machine.fail("gpu_lost", 2)
        node.step(lost_at)
        job.gpus.machine.heal("gpu_lost", 2)  # nvidia-smi -r, 0.1 s after: the board comes back empty
        node.step(lost_at + 0.1)
        assert gpu.processes == [] and worker.state != "Z"  # still dying of its CUDA error
        node.step(lost_at + job.exit_delay_s + 0.1)
        assert gpu.processes == [] and worker.state == "Z" and worker.exit_status == 1 << 8
        node.step(lost_at + job.exit_delay_s + job.reap_s + 0.2)
        assert gpu.processes == [] and worker.gone_at_s is not None
        assert all(p.processes for i, p in enumerate(job.gpus.gpus) if i != 2)  # the other ranks keep theirs
    finally:
        node.close()
