"""GPU processes collector: parsers, races with exiting processes, hidden /proc entries, events, AMD fdinfo."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from rigmon.collectors.base import CollectorHung, EventDraft, NoData
from rigmon.collectors.gpu_processes import (
    FD_RESCAN_S,
    GpuProcessCollector,
    parse_cmdline,
    parse_drm_fdinfo,
    parse_passwd,
    parse_proc_stat,
    parse_status_uid,
    short_command,
)
from rigmon.collectors.process_files import exit_text
from rigmon.hw.nvml import NvmlGpuProcesses, NvmlProcess, NvmlProcessUtil, open_nvml_processes
from rigmon.hw.root import HostRoot
from rigmon.schema import GpuProcessReading
from rigmon.sim.job import PASSWD, SimProcess, proc_stat_line, proc_status
from rigmon.sim.nvml import FakeGpuProcess, FakeNvmlMachine, serving, v100_sxm2_gpus
from rigmon.sim.tree import Tree, write_tree
from tests.collectors.gpu_helpers import StepClock

ARGV = ("/opt/conda/bin/python3", "-u", "train.py", "--config", "cfg.yaml")


# -- parsers ------------------------------------------------------------------------------


def test_parse_proc_stat_comm_with_parentheses_and_zombie_exit_code() -> None:
    fields = ["Z", "1", "2", "3"] + ["0"] * 15 + ["700"] + ["0"] * 29 + ["256"]
    stat = parse_proc_stat("4242 (py (x) y) " + " ".join(fields))
    assert stat is not None
    assert (stat.comm, stat.state, stat.start_ticks, stat.exit_status) == ("py (x) y", "Z", 700, 256)


def test_parse_proc_stat_running_has_no_exit_status_and_old_kernel_short_line() -> None:
    stat = parse_proc_stat("1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 12")
    assert stat is not None and stat.state == "S" and stat.start_ticks == 12 and stat.exit_status is None
    assert parse_proc_stat("garbage") is None
    assert parse_proc_stat("") is None


def test_small_parsers() -> None:
    assert parse_status_uid("Name:\tpython3\nUid:\t1000\t1000\t1000\t1000\n") == 1000
    assert parse_status_uid("Name:\tx\n") is None
    assert parse_cmdline(b"/usr/bin/python3\0train.py\0") == ("/usr/bin/python3", "train.py")
    assert parse_cmdline(b"") == ()
    assert parse_passwd("root:x:0:0::/root:/bin/sh\nbroken\nalice:x:1000:1000::/h:/bin/sh\n") == {0: "root",
                                                                                                   1000: "alice"}


@pytest.mark.parametrize(("argv", "short"), [
    (ARGV, "python3 train.py"),
    (("/usr/bin/python3", "-m", "torch.distributed.run", "--nproc-per-node=4"), "python3 -m torch.distributed.run"),
    (("/home/a/llama.cpp/build/bin/llama-server", "-m", "/models/q.gguf"), "llama-server -m /models/q.gguf"),
    (("./a.out",), "a.out"),
    # Python's options that take a value: the value is no script ("python3 faulthandler" before).
    (("/opt/conda/bin/python3", "-X", "faulthandler", "-u", "train.py"), "python3 train.py"),
    (("python3", "-W", "ignore::DeprecationWarning", "train.py"), "python3 train.py"),
    (("python3", "-Wignore", "train.py"), "python3 train.py"),
    (("python", "-c", "import torch; torch.cuda.init()"), "python -c import torch"),
    (("python3", "-c", "import torch, os; x = torch.zeros(1, device='cuda'); os.system('sleep 100')"),
     "python3 -c import torch, os"),
    # torch.multiprocessing.spawn's DDP workers: the code is multiprocessing's, not the job's.
    (("/usr/bin/python3", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7)",
      "--multiprocessing-fork"), "python3 (multiprocessing worker)"),
    ((), None),
])
def test_short_command(argv: tuple[str, ...], short: str | None) -> None:
    assert short_command(argv) == short


def test_exit_text_names_the_signal() -> None:
    # Before: "killed by signal 9", a number to look up while the job is down.
    assert exit_text(1 << 8) == " (exit code 1)" and exit_text(0) == " (exit code 0)" and exit_text(None) == ""
    assert exit_text(9) == " (killed by SIGKILL, signal 9)"
    assert exit_text(11 | 0x80) == " (killed by SIGSEGV, signal 11, core dumped)"
    assert exit_text(40) == " (killed by signal 40)"  # a real-time signal


def test_parse_drm_fdinfo_new_keys_and_non_drm_files() -> None:
    client = parse_drm_fdinfo("pos:\t0\ndrm-driver:\tamdgpu\ndrm-client-id:\t7\ndrm-pdev:\t0000:c3:00.0\n"
                              "drm-engine-gfx:\t1500 ns\ndrm-engine-capacity-gfx:\t2\ndrm-resident-vram:\t4 MiB\n")
    assert client is not None
    assert (client.driver, client.pdev, client.client_id) == ("amdgpu", "0000:c3:00.0", "7")
    assert client.engine_ns == {"gfx": 1500} and client.vram_bytes == 4 * 1024**2
    assert parse_drm_fdinfo("pos:\t0\nflags:\t02\n") is None


APU_FDINFO = ("drm-driver:\tamdgpu\ndrm-client-id:\t9\ndrm-pdev:\t0000:c3:00.0\n"
              "drm-total-gtt:\t62914560 KiB\ndrm-resident-gtt:\t61865984 KiB\n"
              "drm-total-vram:\t524288 KiB\ndrm-resident-vram:\t393216 KiB\n"
              "drm-memory-vram:\t393216 KiB\ndrm-memory-gtt:\t61865984 KiB\ndrm-memory-cpu:\t1048576 KiB\n"
              "amd-requested-vram:\t62914560 KiB\namd-requested-gtt:\t63438848 KiB\n")


@pytest.mark.parametrize(("text", "vram_kib", "gtt_kib"), [
    # A Strix Halo job (Linux 6.11+): most of its memory is GTT; resident, not total (a buffer not yet
    # populated) nor amd-requested (a buffer that may go in VRAM or GTT is in both); cpu is not the GPU's.
    pytest.param(APU_FDINFO, 393216, 61865984, id="apu-6.11"),
    # amdgpu before 6.11: the drm-memory-* keys only.
    pytest.param("drm-driver:\tamdgpu\ndrm-memory-vram:\t1024 KiB\ndrm-memory-gtt:\t2048 KiB\n", 1024, 2048,
                 id="legacy"),
    # A driver giving only totals.
    pytest.param("drm-driver:\txe\ndrm-total-vram:\t3 MiB\n", 3072, None, id="total-only"),
    pytest.param("drm-driver:\tamdgpu\ndrm-engine-gfx:\t5 ns\n", None, None, id="no-memory-keys"),
])
def test_parse_drm_fdinfo_counts_vram_and_gtt_resident(text: str, vram_kib: int | None, gtt_kib: int | None) -> None:
    # The VRAM alone showed a Strix Halo job holding 60 GiB as 0.4 GiB.
    client = parse_drm_fdinfo(text)
    assert client is not None
    kib = [None if n is None else n * 1024 for n in (vram_kib, gtt_kib)]
    assert [client.vram_bytes, client.gtt_bytes] == kib
    known = [n for n in kib if n is not None]
    assert client.gpu_mem_bytes == (sum(known) if known else None)


# -- the collector against a tree and the fake NVML ---------------------------------------


def _proc(tree: Tree, pid: int, state: str = "R", exit_status: int | None = None, uid: int = 1000,
          argv: tuple[str, ...] = ARGV) -> None:
    proc = SimProcess(pid=pid, ppid=1, uid=uid, argv=argv, start_ticks=123_400, state=state, exit_status=exit_status)
    tree.write(f"/proc/{pid}/stat", proc_stat_line(proc))
    tree.write(f"/proc/{pid}/status", proc_status(proc, "alice"))
    tree.write(f"/proc/{pid}/cmdline", b"" if state == "Z" else "\0".join(argv).encode() + b"\0")


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[Tree, FakeNvmlMachine]]:
    tree = write_tree(tmp_path, {"/proc/stat": "cpu  1 2 3 4\nbtime 1699990000\n",
                                 "/etc/passwd": PASSWD + "alice:x:1000:1000::/home/alice:/bin/bash\n"})
    machine = FakeNvmlMachine(v100_sxm2_gpus(4))
    with serving(tmp_path, machine):
        yield tree, machine


def _collector(root: HostRoot, clock: StepClock | None = None) -> GpuProcessCollector:
    return GpuProcessCollector(open_nvml_processes(root, timeout_s=10.0), root, clock or StepClock())


def _split(records: object) -> tuple[list[GpuProcessReading], list[EventDraft]]:
    assert isinstance(records, list)
    return ([r for r in records if isinstance(r, GpuProcessReading)], [r for r in records if isinstance(r, EventDraft)])


def test_reads_user_command_memory_util_and_start_time(node: tuple[Tree, FakeNvmlMachine]) -> None:
    tree, machine = node
    _proc(tree, 4242)
    machine.gpus[0].processes = [FakeGpuProcess(4242, 15 * 1024**3, sm_pct=97, mem_pct=40)]
    machine.gpus[0].process_sample_us = 10
    collector = _collector(HostRoot(tree.root))
    try:
        (reading,), events = _split(collector.collect())
    finally:
        collector.close()
    assert events == []  # running before the agent: no start event
    assert (reading.pid, reading.gpu_index, reading.user, reading.uid) == (4242, 0, "alice", 1000)
    assert reading.command == "python3 train.py" and reading.cmdline == " ".join(ARGV)
    assert (reading.gpu_mem_bytes, reading.util_pct, reading.mem_util_pct) == (15 * 1024**3, 97.0, 40.0)
    assert reading.started_at == 1_699_990_000 + 1234.0
    assert reading.in_namespace and reading.gpu_uuid == machine.gpus[0].uuid


def test_a_process_that_stopped_using_its_gpu_loses_its_old_utilisation(node: tuple[Tree, FakeNvmlMachine]) -> None:
    # NVML samples a process's utilisation only while it runs on the GPU: one that went idle (training done,
    # the script waiting with its memory held) gave no new sample, and its last one (97 %) stayed on screen
    # beside a GPU at 0 %, as nvidia-smi pmon says "-" for it.
    tree, machine = node
    _proc(tree, 4242)
    machine.gpus[0].processes = [FakeGpuProcess(4242, 15 * 1024**3, sm_pct=97, mem_pct=40)]
    machine.gpus[0].process_sample_us = 10
    clock = StepClock()
    collector = _collector(HostRoot(tree.root), clock)
    try:
        (first,), _ = _split(collector.collect())
        clock.t_s += 5.0  # no new sample yet: a sampling period may be longer than a poll
        (soon,), _ = _split(collector.collect())
        clock.t_s += 10.0
        (idle,), _ = _split(collector.collect())
        machine.gpus[0].process_sample_us = 20  # it runs again
        clock.t_s += 1.0
        (again,), _ = _split(collector.collect())
    finally:
        collector.close()
    assert (first.util_pct, soon.util_pct) == (97.0, 97.0)
    assert (idle.util_pct, idle.mem_util_pct, idle.gpu_mem_bytes) == (None, None, 15 * 1024**3)
    assert again.util_pct == 97.0


def test_container_process_without_a_visible_pid_shows_what_nvml_gives(node: tuple[Tree, FakeNvmlMachine]) -> None:
    tree, machine = node
    machine.gpus[2].processes = [FakeGpuProcess(88123, 8 * 1024**3)]
    collector = _collector(HostRoot(tree.root))
    try:
        (reading,), _ = _split(collector.collect())
    finally:
        collector.close()
    assert (reading.pid, reading.gpu_index, reading.gpu_mem_bytes, reading.in_namespace) == (88123, 2, 8 * 1024**3,
                                                                                               False)
    assert reading.user is None and reading.command is None and reading.started_at is None


class VanishingRoot(HostRoot):
    """The process exits between two reads of its /proc entry: after its stat file is read, the
    directory is gone (as the kernel removes it), so status and cmdline are not there."""

    def __init__(self, root: Path, pid: int) -> None:
        super().__init__(root)
        self.pid = pid

    def read_text(self, rel: str, max_bytes: int = 4 * 1024 * 1024) -> str | None:
        text = super().read_text(rel, max_bytes)
        if rel == f"/proc/{self.pid}/stat":
            shutil.rmtree(self.path(f"/proc/{self.pid}"), ignore_errors=True)
        return text


def test_process_exiting_between_listing_and_reading(node: tuple[Tree, FakeNvmlMachine]) -> None:
    tree, machine = node
    _proc(tree, 4242)
    machine.gpus[0].processes = [FakeGpuProcess(4242, 1024**3)]
    collector = _collector(VanishingRoot(tree.root, 4242))
    try:
        (reading,), _ = _split(collector.collect())
        # Next poll: NVML no longer lists it and /proc has nothing: it exited.
        machine.gpus[0].processes = []
        readings, events = _split(collector.collect())
    finally:
        collector.close()
    assert reading.pid == 4242 and reading.gpu_mem_bytes == 1024**3 and reading.user is None
    assert reading.cmdline is None and reading.command == "[python3]"  # the kernel's name from stat
    assert readings == []
    assert [(e.kind, e.data["exit_code"] if e.data else None) for e in events] == [("gpu_process_exited", None)]


class HiddenRoot(HostRoot):
    """/proc mounted with hidepid (or another user's entry): the files answer EACCES, which
    `HostRoot` reads as ``None``."""

    def __init__(self, root: Path, pid: int) -> None:
        super().__init__(root)
        self.hidden = f"/proc/{pid}/"

    def _read(self, rel: str, max_bytes: int, whole_below: int) -> bytes | None:
        if rel.startswith(self.hidden):
            return None
        return super()._read(rel, max_bytes, whole_below)


def test_unreadable_proc_entry_is_listed_from_nvml(node: tuple[Tree, FakeNvmlMachine]) -> None:
    tree, machine = node
    _proc(tree, 4242)
    _proc(tree, 4243)
    machine.gpus[0].processes = [FakeGpuProcess(4242, 1024**3), FakeGpuProcess(4243, 2 * 1024**3)]
    collector = _collector(HiddenRoot(tree.root, 4243))
    try:
        readings, _ = _split(collector.collect())
    finally:
        collector.close()
    by_pid = {r.pid: r for r in readings}
    assert by_pid[4242].user == "alice" and by_pid[4242].in_namespace
    assert by_pid[4243].in_namespace is False and by_pid[4243].gpu_mem_bytes == 2 * 1024**3
    assert by_pid[4243].user is None and by_pid[4243].command is None


def test_start_exit_with_code_and_release_events(node: tuple[Tree, FakeNvmlMachine]) -> None:
    tree, machine = node
    collector = _collector(HostRoot(tree.root))
    try:
        assert _split(collector.collect()) == ([], [])
        _proc(tree, 4242)
        _proc(tree, 4243)
        machine.gpus[0].processes = [FakeGpuProcess(4242, 1024**3)]
        machine.gpus[1].processes = [FakeGpuProcess(4243, 1024**3)]
        _, started = _split(collector.collect())
        # 4242 dies with exit(1) and is a zombie; 4243 frees its GPU but keeps running.
        _proc(tree, 4242, state="Z", exit_status=1 << 8)
        machine.gpus[0].processes = []
        machine.gpus[1].processes = []
        readings, left = _split(collector.collect())
    finally:
        collector.close()
    assert [(e.kind, e.subject) for e in started] == [("gpu_process_started", "gpu:0"), ("gpu_process_started", "gpu:1")]
    assert started[0].message == "python3 train.py (pid 4242) by alice started on GPU 0"
    assert readings == []
    exited = {e.kind: e for e in left}
    assert exited["gpu_process_exited"].message == "python3 train.py (pid 4242) exited (exit code 1) on GPU 0"
    assert exited["gpu_process_exited"].severity == "warning"
    assert exited["gpu_process_exited"].data is not None and exited["gpu_process_exited"].data["exit_code"] == 1
    assert exited["gpu_process_released"].message == "python3 train.py (pid 4243) released GPU 1 (still running)"


def test_process_on_a_lost_gpu_stays_listed_while_it_runs(node: tuple[Tree, FakeNvmlMachine]) -> None:
    tree, machine = node
    _proc(tree, 4245)
    machine.gpus[3].processes = [FakeGpuProcess(4245, 1024**3)]
    collector = _collector(HostRoot(tree.root))
    try:
        collector.collect()
        machine.fail("gpu_lost", 3)
        (still,), none = _split(collector.collect())
        _proc(tree, 4245, state="Z", exit_status=9)
        readings, (exited,) = _split(collector.collect())
    finally:
        collector.close()
    assert none == [] and still.pid == 4245 and still.gpu_index == 3 and still.gpu_mem_bytes is None
    assert readings == []
    assert exited.kind == "gpu_process_exited" and "(killed by SIGKILL, signal 9)" in exited.message


def test_no_nvidia_driver_and_no_amd_card_is_absent(tmp_path: Path) -> None:
    write_tree(tmp_path, {"/proc/stat": "btime 1\n"})
    collector = _collector(HostRoot(tmp_path))
    try:
        with pytest.raises(NoData):
            collector.collect()
    finally:
        collector.close()


def test_amd_fdinfo_busy_time_becomes_utilisation(tmp_path: Path) -> None:
    bus = "0000:c3:00.0"
    tree = write_tree(tmp_path, {"/proc/stat": "btime 1699990000\n", f"/sys/bus/pci/devices/{bus}/vendor": "0x1002\n"})
    tree.symlink("/sys/class/drm/card0/device", f"../../../bus/pci/devices/{bus}")
    _proc(tree, 6001)
    tree.symlink("/proc/6001/fd/5", "/dev/dri/renderD128")

    def fdinfo(busy_ns: int) -> None:
        tree.write("/proc/6001/fdinfo/5", f"drm-driver:\tamdgpu\ndrm-client-id:\t3\ndrm-pdev:\t{bus}\n"
                                          f"drm-engine-gfx:\t{busy_ns} ns\ndrm-memory-vram:\t1024 KiB\n")

    clock = StepClock()
    collector = _collector(HostRoot(tmp_path), clock)
    try:
        fdinfo(1_000_000_000)
        (first,), _ = _split(collector.collect())
        clock.t_s = 2.0
        fdinfo(2_500_000_000)  # 1.5 s busy in 2 s
        (second,), _ = _split(collector.collect())
    finally:
        collector.close()
    assert first.vendor == "amd" and first.pci_bus_id == bus and first.gpu_mem_bytes == 1024 * 1024
    assert first.util_pct is None and second.util_pct == 75.0
    assert second.user == "1000"  # no passwd line: the number


def test_amd_process_opening_its_render_node_later_is_found_at_the_next_rescan(tmp_path: Path) -> None:
    bus = "0000:c3:00.0"
    tree = write_tree(tmp_path, {"/proc/stat": "btime 1699990000\n", f"/sys/bus/pci/devices/{bus}/vendor": "0x1002\n"})
    tree.symlink("/sys/class/drm/card0/device", f"../../../bus/pci/devices/{bus}")
    _proc(tree, 6001)
    tree.symlink("/proc/6001/fd/0", "/dev/null")
    clock = StepClock()
    collector = _collector(HostRoot(tmp_path), clock)
    try:
        assert _split(collector.collect()) == ([], [])
        tree.symlink("/proc/6001/fd/5", "/dev/dri/renderD128")
        tree.write("/proc/6001/fdinfo/5", f"drm-driver:\tamdgpu\ndrm-client-id:\t3\ndrm-pdev:\t{bus}\n")
        clock.t_s = 1.0
        assert _split(collector.collect()) == ([], [])  # not scanned again yet
        clock.t_s = 1.0 + FD_RESCAN_S
        (found,), (started,) = _split(collector.collect())
    finally:
        collector.close()
    assert found.pid == 6001 and started.kind == "gpu_process_started"


def test_hung_driver_is_a_hung_collector(node: tuple[Tree, FakeNvmlMachine]) -> None:
    tree, machine = node
    root = HostRoot(tree.root)
    collector = GpuProcessCollector(open_nvml_processes(root, timeout_s=0.2), root, StepClock())
    try:
        collector.collect()  # NVML started (a hang inside the first nvmlInit is "starting" for a while)
        machine.fail("hang")
        with pytest.raises(CollectorHung):
            collector.collect()
    finally:
        machine.heal("hang")
        collector.close()


class OneHandOff:
    """An NVML seam that answers only the batched read: the collector must not ask GPU by GPU."""

    def __init__(self) -> None:
        self.asked: list[dict[int, int]] = []

    def read_all_processes(self, utils_since_us: Mapping[int, int]) -> list[NvmlGpuProcesses]:
        self.asked.append(dict(utils_since_us))
        return [NvmlGpuProcesses(index=0, uuid="GPU-0", lost=False, listed=True,
                                 processes=(NvmlProcess(pid=4242, used_bytes=1024**3, kind="compute"),),
                                 utils=(NvmlProcessUtil(pid=4242, timestamp_us=77, sm_pct=50, mem_pct=5),)),
                NvmlGpuProcesses(index=1, uuid="GPU-1", lost=False, listed=True)]

    def close(self) -> None:
        pass


def test_every_gpu_is_listed_in_one_nvml_hand_off(node: tuple[Tree, FakeNvmlMachine]) -> None:
    tree, _ = node
    _proc(tree, 4242)
    seam = OneHandOff()
    collector = GpuProcessCollector(seam, HostRoot(tree.root), StepClock())  # type: ignore[arg-type]
    (reading,), _ = _split(collector.collect())
    collector.collect()
    assert (reading.pid, reading.gpu_index, reading.util_pct, reading.command) == (4242, 0, 50.0, "python3 train.py")
    # The second poll asks only for utilisation samples newer than the first one's.
    assert seam.asked == [{}, {0: 77}]


def test_a_reused_pid_is_read_again_as_the_new_process(node: tuple[Tree, FakeNvmlMachine]) -> None:
    tree, machine = node
    _proc(tree, 4242)
    machine.gpus[0].processes = [FakeGpuProcess(4242, 1024**3)]
    collector = _collector(HostRoot(tree.root))
    try:
        (first,), _ = _split(collector.collect())
        # Same PID, another process (a later start time): its user and command line are its own,
        # although the previous one's were kept from poll to poll.
        other = SimProcess(pid=4242, ppid=1, uid=0, argv=("/usr/bin/python3", "serve.py"), start_ticks=999_000)
        tree.write("/proc/4242/stat", proc_stat_line(other))
        tree.write("/proc/4242/status", proc_status(other, "root"))
        tree.write("/proc/4242/cmdline", b"/usr/bin/python3\0serve.py\0")
        (second,), _ = _split(collector.collect())
    finally:
        collector.close()
    assert (first.command, first.user) == ("python3 train.py", "alice")
    assert (second.command, second.user, second.uid) == ("python3 serve.py", "root", 0)


def test_processes_stay_on_their_gpu_when_a_gpu_before_it_leaves_the_count(
        node: tuple[Tree, FakeNvmlMachine]) -> None:
    """GPU 1 leaves NVML's device count, so GPU 2 answers at NVML index 1: its process is still
    listed on GPU 2 (the index the GPU collector keeps for it), with no exit or start event."""
    tree, machine = node
    _proc(tree, 4242)
    machine.gpus[2].processes = [FakeGpuProcess(4242, 13 * 1024**3)]
    collector = _collector(HostRoot(tree.root))
    try:
        (before,), _ = _split(collector.collect())
        with machine.lock:
            machine.gpus.pop(1)
        (after,), events = _split(collector.collect())
    finally:
        collector.close()
    assert (before.gpu_index, before.gpu_uuid) == (2, machine.gpus[1].uuid)
    assert (after.gpu_index, after.gpu_uuid, after.gpu_mem_bytes) == (2, machine.gpus[1].uuid, 13 * 1024**3)
    assert events == []


def test_a_process_on_a_gpu_gone_from_the_count_stays_listed_while_it_runs(
        node: tuple[Tree, FakeNvmlMachine]) -> None:
    """GPU 1 leaves NVML's device count (off the bus) while its worker still runs: the worker stays
    listed on GPU 1 without memory figures, not "released (still running)"."""
    tree, machine = node
    _proc(tree, 4243)
    machine.gpus[1].processes = [FakeGpuProcess(4243, 13 * 1024**3)]
    collector = _collector(HostRoot(tree.root))
    try:
        collector.collect()
        with machine.lock:
            machine.gpus.pop(1)
        (after,), events = _split(collector.collect())
    finally:
        collector.close()
    assert (after.pid, after.gpu_index, after.gpu_mem_bytes, after.state) == (4243, 1, None, "R")
    assert events == []


def test_a_pid_reused_between_two_polls_is_an_exit_and_a_start(node: tuple[Tree, FakeNvmlMachine]) -> None:
    """The worker on GPU 0 exits and another process gets its PID and GPU 0 before the next poll
    (or, with the GPU lost, a process off the GPU gets the PID): the worker exited, whatever holds
    the PID now is another process. Before, neither event came, or the worker was "still running"."""
    tree, machine = node
    _proc(tree, 4242)
    _proc(tree, 4245)
    machine.gpus[0].processes = [FakeGpuProcess(4242, 1024**3)]
    machine.gpus[3].processes = [FakeGpuProcess(4245, 1024**3)]
    collector = _collector(HostRoot(tree.root))
    try:
        collector.collect()
        for pid, argv, state in ((4242, ("/usr/bin/python3", "eval.py"), "R"), (4245, ("/bin/bash",), "Z")):
            # 4245's PID went to a shell that is a zombie already: its exit code is not the worker's.
            other = SimProcess(pid=pid, ppid=1, uid=1000, argv=argv, start_ticks=999_000, state=state,
                               exit_status=None if state == "R" else 2 << 8)
            tree.write(f"/proc/{pid}/stat", proc_stat_line(other))
            tree.write(f"/proc/{pid}/status", proc_status(other, "alice"))
            tree.write(f"/proc/{pid}/cmdline", "\0".join(argv).encode() + b"\0")
        machine.fail("gpu_lost", 3)
        readings, events = _split(collector.collect())
    finally:
        collector.close()
    assert [(e.kind, e.message) for e in events] == [
        ("gpu_process_exited", "python3 train.py (pid 4242) exited on GPU 0"),
        ("gpu_process_exited", "python3 train.py (pid 4245) exited on GPU 3"),
        ("gpu_process_started", "python3 eval.py (pid 4242) by alice started on GPU 0"),
    ]
    assert [(r.pid, r.gpu_index, r.command) for r in readings] == [(4242, 0, "python3 eval.py")]


def test_a_process_that_execs_another_program_shows_its_new_command_at_the_next_poll(
        node: tuple[Tree, FakeNvmlMachine]) -> None:
    """Same PID, same start time, another program (exec; or a setproctitle rename): the kernel's name
    in the stat line read every poll changed. Before, the old command line was kept up to a minute."""
    tree, machine = node
    _proc(tree, 4242, argv=("/bin/bash", "run.sh"))
    machine.gpus[0].processes = [FakeGpuProcess(4242, 1024**3)]
    collector = _collector(HostRoot(tree.root))
    try:
        (first,), _ = _split(collector.collect())
        _proc(tree, 4242, argv=ARGV)  # exec python3 train.py: same start ticks
        (second,), events = _split(collector.collect())
    finally:
        collector.close()
    assert first.command == "bash run.sh"
    assert second.command == "python3 train.py" and events == []
