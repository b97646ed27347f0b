"""GPU processes collector: an agent whose /proc is a container's PID namespace, and NVML that stops
answering on a node with AMD GPUs as well."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rigmon.collectors.base import EventDraft
from rigmon.collectors.gpu_processes import GpuProcessCollector
from rigmon.collectors.process_files import parse_status_nspid, procfs_shows_host_pids
from rigmon.hw.nvml import open_nvml_processes
from rigmon.hw.root import HostRoot
from rigmon.schema import GpuProcessReading
from rigmon.sim.job import (
    PASSWD,
    SimPidNamespace,
    SimProcess,
    proc_stat_line,
    proc_status,
)
from rigmon.sim.nvml import FakeGpuProcess, FakeNvmlMachine, serving, v100_sxm2_gpus
from rigmon.sim.tree import Tree, write_tree
from tests.collectors.gpu_helpers import StepClock

ARGV = ("/opt/conda/bin/python3", "-u", "train.py")
HOST_NS, CONTAINER_NS = "pid:[4026531836]", "pid:[4026532513]"
AMD_BUS = "0000:c3:00.0"


def _write(tree: Tree, proc: SimProcess) -> None:
    tree.write(f"/proc/{proc.pid}/stat", proc_stat_line(proc))
    tree.write(f"/proc/{proc.pid}/status", proc_status(proc, "alice"))
    tree.write(f"/proc/{proc.pid}/cmdline", b"" if proc.state == "Z" else "\0".join(proc.argv).encode() + b"\0")


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[Tree, FakeNvmlMachine]]:
    tree = write_tree(tmp_path, {"/proc/stat": "cpu  1 2 3 4\nbtime 1699990000\n",
                                 "/etc/passwd": PASSWD + "alice:x:1000:1000::/home/alice:/bin/bash\n"})
    machine = FakeNvmlMachine(v100_sxm2_gpus(2))
    with serving(tmp_path, machine):
        yield tree, machine


def _collector(root: HostRoot, timeout_s: float = 10.0) -> GpuProcessCollector:
    return GpuProcessCollector(open_nvml_processes(root, timeout_s=timeout_s), root, StepClock())


def _split(records: object) -> tuple[list[GpuProcessReading], list[EventDraft]]:
    assert isinstance(records, list)
    return ([r for r in records if isinstance(r, GpuProcessReading)], [r for r in records if isinstance(r, EventDraft)])


# -- which PID namespace a /proc shows ------------------------------------------------------


@pytest.mark.parametrize(("first", "own", "status", "host"), [
    (HOST_NS, CONTAINER_NS, "NSpid:\t812\t1\n", True),  # the host's /proc bind-mounted in a container
    (CONTAINER_NS, CONTAINER_NS, "NSpid:\t1\n", False),  # a container's own /proc
    (None, HOST_NS, "NSpid:\t2187\n", True),  # PID 1 not readable (no ptrace rights): the agent's own
    (None, CONTAINER_NS, "NSpid:\t7\n", False),
    (None, CONTAINER_NS, "NSpid:\t812\t7\n", None),  # the agent nested below the /proc's namespace
    (None, CONTAINER_NS, "Name:\tpython3\n", None),  # before Linux 4.1: no NSpid
    (None, None, None, None),  # a tree without the links (fixtures)
    ("garbage", None, None, None),
])
def test_procfs_shows_host_pids(first: str | None, own: str | None, status: str | None, host: bool | None) -> None:
    assert procfs_shows_host_pids(first, own, status) is host


def test_parse_status_nspid() -> None:
    assert parse_status_nspid("Pid:\t9\nNSpid:\t27394\t9\t1\n") == (27394, 9, 1)
    assert parse_status_nspid("NSpid:\tx\n") == () and parse_status_nspid("") == ()


# -- an agent in a container's PID namespace ------------------------------------------------


def test_sim_writes_the_pid_namespace_links(tmp_path: Path) -> None:
    tree = Tree(tmp_path)
    SimPidNamespace().write(tree)
    root = HostRoot(tmp_path)
    assert root.readlink("/proc/1/ns/pid") == HOST_NS and root.readlink("/proc/self/ns/pid") == HOST_NS
    assert "NSpid:\t2187\n" in (root.read_text("/proc/self/status") or "")
    SimPidNamespace(container=True, agent_pid=1).write(Tree(tmp_path / "c"))
    assert HostRoot(tmp_path / "c").readlink("/proc/self/ns/pid") == CONTAINER_NS


@pytest.mark.parametrize("first_readable", [True, False])
def test_nvml_pids_are_not_looked_up_in_a_containers_proc(node: tuple[Tree, FakeNvmlMachine],
                                                          first_readable: bool) -> None:
    """NVML lists host PID 4242; in the container's /proc, 4242 is a shell that exits with code 2.
    Before: the worker showed as the shell (sh, root) and "exited (exit code 2)" with it; then
    "exited" without a status, although the agent cannot see whether it exited at all."""
    tree, machine = node
    shell = SimProcess(pid=4242, ppid=1, uid=0, argv=("/bin/sh", "-c", "sleep 5"), start_ticks=9000)
    SimPidNamespace(container=True, agent_pid=1, first_readable=first_readable, processes=[shell]).write(tree)
    machine.gpus[0].processes = [FakeGpuProcess(4242, 1024**3)]
    collector = _collector(HostRoot(tree.root))
    try:
        (reading,), _ = _split(collector.collect())
        note = collector.status_note()
        shell.state, shell.exit_status = "Z", 2 << 8
        _write(tree, shell)
        machine.gpus[0].processes = []
        readings, (left,) = _split(collector.collect())
    finally:
        collector.close()
    assert (reading.pid, reading.gpu_mem_bytes, reading.in_namespace) == (4242, 1024**3, False)
    assert (reading.user, reading.uid, reading.command, reading.cmdline, reading.started_at) == (None,) * 5
    # Said in the reading, for the dashboard, as well as in the status's words.
    assert reading.agent_other_pid_ns is True
    assert note is not None and note.startswith(f"command not visible (agent in another PID namespace, {CONTAINER_NS}")
    assert "--pid=host" in note
    assert readings == [] and left.kind == "gpu_process_left" and left.severity == "info"
    assert left.message == "process (pid 4242) left GPU 0 (exit not visible to the agent)"
    assert left.data is not None and "exit_code" not in left.data and left.data["in_namespace"] is False


def test_the_hosts_proc_is_read_as_before(node: tuple[Tree, FakeNvmlMachine]) -> None:
    tree, machine = node
    SimPidNamespace().write(tree)
    _write(tree, SimProcess(pid=4242, ppid=1, uid=1000, argv=ARGV, start_ticks=123_400))
    machine.gpus[0].processes = [FakeGpuProcess(4242, 1024**3)]
    collector = _collector(HostRoot(tree.root))
    try:
        (reading,), _ = _split(collector.collect())
    finally:
        collector.close()
    assert (reading.in_namespace, reading.user, reading.command) == (True, "alice", "python3 train.py")
    assert collector.status_note() is None and reading.agent_other_pid_ns is False


def test_in_a_container_a_lost_gpus_process_stays_listed(node: tuple[Tree, FakeNvmlMachine]) -> None:
    """The agent cannot see whether a host process runs: while its GPU is lost it stays as it was,
    not "exited" at once."""
    tree, machine = node
    SimPidNamespace(container=True, agent_pid=1).write(tree)
    machine.gpus[1].processes = [FakeGpuProcess(4243, 1024**3)]
    collector = _collector(HostRoot(tree.root))
    try:
        collector.collect()
        machine.fail("gpu_lost", 1)
        (still,), events = _split(collector.collect())
    finally:
        collector.close()
    assert (still.pid, still.gpu_index, still.gpu_mem_bytes, still.in_namespace) == (4243, 1, None, False)
    assert events == []


class HiddenRoot(HostRoot):
    """/proc mounted with hidepid=2 for the agent's user: other users' /proc/PID entries answer nothing
    (`HostRoot` reads EACCES as ``None``)."""

    def __init__(self, root: Path, pids: set[int]) -> None:
        super().__init__(root)
        self.hidden = tuple(f"/proc/{pid}/" for pid in pids)

    def _read(self, rel: str, max_bytes: int, whole_below: int) -> bytes | None:
        return None if rel.startswith(self.hidden) else super()._read(rel, max_bytes, whole_below)


def test_a_hidden_process_leaving_its_gpu_is_not_said_to_exit(node: tuple[Tree, FakeNvmlMachine]) -> None:
    """An agent in the host's namespace that cannot read a PID's /proc entry (hidepid, another user's)
    cannot tell its exit from its release: it "left" the GPU; one on a lost GPU stays listed, as a
    host PID seen from a container does. Before: both "exited", without a status."""
    tree, machine = node
    SimPidNamespace().write(tree)
    for pid in (4242, 4243, 4244):
        _write(tree, SimProcess(pid=pid, ppid=1, uid=1000, argv=ARGV, start_ticks=123_400))
    machine.gpus[0].processes = [FakeGpuProcess(4242, 1024**3), FakeGpuProcess(4244, 1024**3)]
    machine.gpus[1].processes = [FakeGpuProcess(4243, 1024**3)]
    collector = _collector(HiddenRoot(tree.root, {4242, 4243}))
    try:
        listed, _ = _split(collector.collect())
        # 4244, which the agent sees, exits: its /proc entry goes.
        for path in tree.root.joinpath("proc/4244").iterdir():
            path.unlink()
        machine.gpus[0].processes = []
        machine.fail("gpu_lost", 1)
        readings, events = _split(collector.collect())
    finally:
        collector.close()
    assert [(r.pid, r.in_namespace) for r in listed] == [(4242, False), (4244, True), (4243, False)]
    assert [(e.kind, e.message) for e in events] == [
        ("gpu_process_left", "process (pid 4242) left GPU 0 (exit not visible to the agent)"),
        ("gpu_process_exited", "python3 train.py (pid 4244) exited on GPU 0")]
    assert [(r.pid, r.gpu_index, r.gpu_mem_bytes, r.in_namespace) for r in readings] == [(4243, 1, None, False)]


# -- NVML stops answering on a node with AMD GPUs as well ------------------------------------


def _amd_worker(tree: Tree) -> None:
    tree.write(f"/sys/bus/pci/devices/{AMD_BUS}/vendor", "0x1002\n")
    tree.symlink("/sys/class/drm/card0/device", f"../../../bus/pci/devices/{AMD_BUS}")
    _write(tree, SimProcess(pid=6001, ppid=1, uid=1000, argv=ARGV, start_ticks=123_000, state="R"))
    tree.symlink("/proc/6001/fd/5", "/dev/dri/renderD128")
    tree.write("/proc/6001/fdinfo/5", f"drm-driver:\tamdgpu\ndrm-client-id:\t3\ndrm-pdev:\t{AMD_BUS}\n")


@pytest.mark.parametrize("failure", ["driver_missing", "hang"])
def test_nvidia_processes_stay_while_nvml_does_not_answer_on_a_mixed_node(
        node: tuple[Tree, FakeNvmlMachine], failure: str) -> None:
    """Before: every NVIDIA worker was "released (still running)" (or, its GPU's processes gone,
    exited) when the driver was unloaded; a hung NVML failed the collector, AMD processes with it."""
    tree, machine = node
    _amd_worker(tree)
    _write(tree, SimProcess(pid=4242, ppid=1, uid=1000, argv=ARGV, start_ticks=123_400, state="R"))
    machine.gpus[0].processes = [FakeGpuProcess(4242, 1024**3)]
    collector = _collector(HostRoot(tree.root), timeout_s=0.2)
    try:
        collector.collect()
        machine.fail(failure)  # type: ignore[arg-type]
        readings, events = _split(collector.collect())
        note = collector.status_note()
        machine.heal(failure)  # type: ignore[arg-type]
        for _ in range(50):  # the hung call returns, and the next poll is answered
            again, back = _split(collector.collect())
            if collector.status_note() is None:
                break
    finally:
        machine.heal(failure)  # type: ignore[arg-type]
        collector.close()
    assert events == [] and back == []
    assert [(r.vendor, r.pid, r.gpu_mem_bytes) for r in readings] == [("amd", 6001, None), ("nvidia", 4242, None)]
    assert note is not None and note.startswith("NVML not answering (") and "kept as last listed" in note
    assert [(r.vendor, r.pid, r.gpu_mem_bytes) for r in again] == [("amd", 6001, None), ("nvidia", 4242, 1024**3)]


def test_nvml_answering_late_on_a_mixed_node_starts_nothing(node: tuple[Tree, FakeNvmlMachine]) -> None:
    """NVML does not answer the first poll (the AMD processes are listed): the NVIDIA processes its
    first answer lists ran before the agent, as the first poll's do."""
    tree, machine = node
    _amd_worker(tree)
    _write(tree, SimProcess(pid=4242, ppid=1, uid=1000, argv=ARGV, start_ticks=123_400, state="R"))
    machine.gpus[0].processes = [FakeGpuProcess(4242, 1024**3)]
    machine.fail("driver_missing")
    collector = _collector(HostRoot(tree.root))
    try:
        (amd,), _ = _split(collector.collect())
        machine.heal("driver_missing")
        readings, events = _split(collector.collect())
    finally:
        collector.close()
    assert amd.vendor == "amd" and collector.status_note() is None
    assert [r.pid for r in readings] == [6001, 4242] and events == []
