"""A simulated rig's end: nothing is written below its directory once it is removed."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from rigmon.agent.agent import Agent
from rigmon.sim.rig import SimRig, get_scenario, running_rig
from rigmon.sim.tree import Tree, TreeGone


def test_a_removed_tree_is_never_created_again(tmp_path: Path) -> None:
    tree = Tree(tmp_path / "node01")
    tree.write("/proc/loadavg", "0.1 0.2 0.3 1/2 3\n")
    shutil.rmtree(tree.root)
    with pytest.raises(TreeGone):
        tree.write("/sys/class/hwmon/hwmon0/temp1_input", "40000\n")
    with pytest.raises(TreeGone):
        tree.write("/proc/loadavg", "0.1 0.2 0.3 1/2 3\n")
    with pytest.raises(TreeGone):
        tree.append("/dev/kmsg", "6,1,0,-;hello\n")
    with pytest.raises(TreeGone):
        tree.symlink("/sys/class/net/eth0/device", "../../../devices/pci0000:00")
    assert list(tmp_path.iterdir()) == []


def test_directories_below_the_root_are_still_created(tmp_path: Path) -> None:
    tree = Tree(tmp_path / "node01")
    tree.write("/sys/class/hwmon/hwmon0/temp1_input", "40000\n")
    tree.remove("/sys/class")
    tree.append("/sys/class/x/log", "a\n")
    assert (tree.root / "sys" / "class" / "hwmon" / "hwmon0" / "temp1_input").exists() is False
    assert (tree.root / "sys" / "class" / "x" / "log").read_text() == "a\n"


async def test_the_physics_end_quietly_when_their_trees_were_removed(tmp_path: Path) -> None:
    rig = SimRig(get_scenario("healthy"), 1, tmp_path / "rig")
    shutil.rmtree(tmp_path / "rig")
    # Before: each step made the node's tree again, for as long as the rig's owner let it run.
    await asyncio.wait_for(rig.run(first_step_s=0.0), 30)
    rig.close()
    assert list(tmp_path.iterdir()) == []


async def test_a_rig_whose_stop_is_cancelled_still_stops_every_writer_before_its_directory_goes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A second cancellation while the rig stops (a second Ctrl-C, a test's timeout) used to cut the
    stop short: the directory was removed with the physics still stepping and the agent journalling,
    and they made it again (a ``rigmon-sim-*`` left behind, with a node's tree and a journal)."""
    stopping = asyncio.Event()
    release = asyncio.Event()
    real_stop = Agent.stop

    async def held_stop(agent: Agent) -> None:
        stopping.set()
        await release.wait()
        await real_stop(agent)

    monkeypatch.setattr(Agent, "stop", held_stop)
    entered: asyncio.Future[Path] = asyncio.get_running_loop().create_future()
    stepped = asyncio.Event()

    async def use() -> None:
        async with running_rig("healthy", 1, base_port=0, speed=5.0) as rr:
            real_step = rr.rig.step

            def step(t_s: float | None = None) -> None:
                real_step(t_s)
                stepped.set()

            monkeypatch.setattr(rr.rig, "step", step)
            entered.set_result(rr.rig.nodes[0].tree.root.parent)
            await asyncio.Event().wait()

    user = asyncio.create_task(use())
    workdir = await entered
    physics = next(t for t in asyncio.all_tasks() if t.get_name() == "sim-physics")
    user.cancel()
    await stopping.wait()  # the rig's exit has begun: its agent is stopping
    user.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await user
    # The physics have ended (or take one more step, which made the removed directory again).
    stepped.clear()
    step_seen = asyncio.create_task(stepped.wait())
    await asyncio.wait([physics, step_seen], return_when=asyncio.FIRST_COMPLETED)
    step_seen.cancel()
    assert physics.done()
    assert not workdir.exists()
