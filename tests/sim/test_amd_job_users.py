"""The user of a simulated AMD job: in the node's /etc/passwd from the start, as on a real machine,
so the real process collector names it (not its bare UID) however late the job starts."""

from __future__ import annotations

import random
from pathlib import Path

from rigmon.collectors.gpu_processes import GpuProcessCollector
from rigmon.hw.nvml import open_nvml_processes
from rigmon.hw.root import HostRoot
from rigmon.schema import GpuProcessReading
from rigmon.sim.gpu import SimAmdGpu
from rigmon.sim.job import SimAmdJob
from rigmon.sim.node import SimNode
from rigmon.sim.rig import get_scenario
from rigmon.sim.tree import Tree
from tests.collectors.test_gpu_processes import StepClock


def _users(collector: GpuProcessCollector) -> dict[int, str | None]:
    return {r.pid: r.user for r in collector.collect() if isinstance(r, GpuProcessReading)}


def test_a_strix_job_that_starts_after_the_agent_shows_its_user(tmp_path: Path) -> None:
    """The demo's GPU process showed user "1000": the agent read /etc/passwd before the job
    started, when the simulator had not written it yet, and keeps user names a minute."""
    node = SimNode(name="node01", tree=Tree(tmp_path / "node01"), rng=random.Random("1:0"))
    scenario = get_scenario("strix-cluster")
    scenario.build(node, 0)
    root = HostRoot(node.tree.root)
    collector = GpuProcessCollector(open_nvml_processes(root, timeout_s=10.0), root, StepClock())
    try:
        scenario.drive(node, 0, 0.0)
        node.step(0.0)
        assert _users(collector) == {}
        for t_s in (6.0, 7.0):
            scenario.drive(node, 0, t_s)
            node.step(t_s)
        assert _users(collector) == {5151: "dave"}
    finally:
        node.close()


def test_a_second_jobs_user_is_added_to_the_passwd_the_first_wrote(tmp_path: Path) -> None:
    node = SimNode(name="node01", tree=Tree(tmp_path / "node01"), rng=random.Random("1:0"))
    gpu = SimAmdGpu()
    node.devices.append(gpu)
    node.devices.append(SimAmdJob(gpu, start_s=1.0))
    node.devices.append(SimAmdJob(gpu, start_s=3.0, user="erin", uid=1001, pid=5252, client_id=12))
    try:
        for t_s in (0.0, 2.0, 4.0):
            node.step(t_s)
    finally:
        node.close()
    passwd = (node.tree.root / "etc/passwd").read_text()
    assert "\ndave:x:1000:1000:" in passwd and "\nerin:x:1001:1001:" in passwd
    assert passwd.startswith("root:x:0:0:") and passwd.count("\ndave:") == 1
