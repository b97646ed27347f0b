"""A simulated training job: DDP worker processes in the fake /proc and in the fake NVML's process lists;
the PID namespace that /proc shows the agent."""

from __future__ import annotations

from dataclasses import dataclass, field

from rigmon.sim.gpu import SimAmdGpu, SimNvidiaGpus
from rigmon.sim.node import SimNode
from rigmon.sim.nvml import FakeGpuProcess
from rigmon.sim.tree import Tree

USER_HZ = 100
MIB = 1024**2
GIB = 1024**3
#: GPU memory the driver and CUDA context take before a process allocates anything.
DRIVER_RESERVE_BYTES = 310 * MIB
#: Wait status of ``exit(1)`` as /proc/PID/stat field 52 holds it.
EXIT_STATUS_ONE = 1 << 8
#: Inode of the host's (initial) PID namespace in /proc/PID/ns/pid links: the kernel's PROC_PID_INIT_INO.
INIT_PID_NS_INODE = 0xEFFFFFFC
PASSWD = (
    "root:x:0:0:root:/root:/bin/bash\n"
    "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
    "rigmon:x:998:998:rigmon agent:/var/lib/rigmon:/usr/sbin/nologin\n"
)


def add_user(tree: Tree, user: str, uid: int) -> None:
    """Put ``user`` in the node's ``/etc/passwd`` (the base accounts first when there is none yet),
    as a real machine has every job's user before the job starts: a job after another adds its own."""
    path = tree.path("/etc/passwd")
    text = path.read_text(encoding="utf-8") if path.exists() else PASSWD
    if any(line.split(":", 1)[0] == user for line in text.splitlines()):
        if not path.exists():
            tree.write("/etc/passwd", text)
        return
    tree.write("/etc/passwd", text + f"{user}:x:{uid}:{uid}::/home/{user}:/bin/bash\n")


@dataclass
class SimProcess:
    """One process of the fake /proc: identity, state, and the wait status once it is a zombie."""

    pid: int
    ppid: int
    uid: int
    argv: tuple[str, ...]
    start_ticks: int
    gpu_index: int | None = None
    state: str = "S"
    exit_status: int | None = None
    gone_at_s: float | None = None
    exited_at_s: float | None = None

    @property
    def comm(self) -> str:
        """The kernel's 15-character process name."""
        return (self.argv[0].rsplit("/", 1)[-1] if self.argv else "?")[:15]


def proc_stat_line(proc: SimProcess) -> str:
    """``/proc/PID/stat`` of a process (52 fields; zeros where the simulation has no value)."""
    fields: dict[int, object] = {1: proc.pid, 2: f"({proc.comm})", 3: proc.state, 4: proc.ppid, 5: proc.ppid,
                                 6: proc.ppid, 7: 0, 8: -1, 9: 4194560, 18: 20, 19: 0, 20: 1 if proc.state == "Z" else 24,
                                 22: proc.start_ticks, 52: proc.exit_status or 0}
    return " ".join(str(fields.get(n, 0)) for n in range(1, 53)) + "\n"


def proc_status(proc: SimProcess, user_name: str) -> str:
    """``/proc/PID/status`` (the lines collectors read)."""
    states = {"R": "R (running)", "S": "S (sleeping)", "Z": "Z (zombie)"}
    uid = proc.uid
    return (f"Name:\t{proc.comm}\nUmask:\t0022\nState:\t{states.get(proc.state, proc.state)}\nTgid:\t{proc.pid}\n"
            f"Pid:\t{proc.pid}\nPPid:\t{proc.ppid}\nNSpid:\t{proc.pid}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n"
            f"Gid:\t{uid}\t{uid}\t{uid}\t{uid}\nThreads:\t{1 if proc.state == 'Z' else 24}\n")


@dataclass
class SimDdpJob:
    """A ``torchrun`` job with one worker per GPU of ``gpus`` (PyTorch DDP).

    At ``start_s`` the launcher starts one ``python train.py`` worker per GPU; each fills its
    GPU's memory over ``fill_s`` (model, optimizer state, then the caching allocator's
    blocks) and reports the GPU's utilisation as its own. When a GPU falls off the bus, its
    worker dies ``exit_delay_s`` later (a CUDA error: exit code 1) and stays a zombie for
    ``reap_s`` until the launcher reaps it; the other workers hang in their next all-reduce
    (NCCL waits for the lost rank) and keep their GPUs.

    With ``checkpoint_every_s``, the script marks each checkpoint on the node's timeline
    (``epoch N checkpoint``, `SimNode.marks`, as ``rigmon mark`` in a training script does) while
    every worker runs: a job hung on a lost rank writes no more checkpoints.

    Add it after the GPUs, so it sees this step's losses. With ``in_agent_namespace`` false its
    processes are the host's, outside the /proc the agent reads (see `SimPidNamespace`): only
    NVML lists them.
    """

    gpus: SimNvidiaGpus
    start_s: float = 10.0
    user: str = "alice"
    uid: int = 1000
    launcher_pid: int = 4237
    first_pid: int = 4242
    argv: tuple[str, ...] = ("/opt/conda/bin/python3", "-u", "train.py", "--config", "configs/llama-7b-ft.yaml")
    vram_bytes: int = int(13.9 * GIB)
    fill_s: float = 4.0
    exit_delay_s: float = 0.4
    reap_s: float = 5.0
    processes: list[SimProcess] = field(default_factory=list)
    in_agent_namespace: bool = True
    checkpoint_every_s: float | None = None
    _checkpoints: int = 0
    _lost_at_s: dict[int, float] = field(default_factory=dict)
    _written: dict[int, str] = field(default_factory=dict)
    _user_added: bool = False

    def __post_init__(self) -> None:
        self.gpus.memory_from_processes = True

    def advance(self, node: SimNode, t_s: float, dt_s: float) -> None:
        if t_s < self.start_s:
            return
        if not self.processes:
            self._launch(node)
        ran_s = t_s - self.start_s
        fill = min(1.0, ran_s / self.fill_s) if self.fill_s > 0 else 1.0
        used = int(self.vram_bytes * fill) // (2 * MIB) * (2 * MIB)
        with self.gpus.machine.lock:
            for proc in self.processes:
                if proc.gpu_index is None:
                    continue
                gpu = self.gpus.gpus[proc.gpu_index]
                if gpu.lost and proc.state != "Z" and proc.gone_at_s is None:
                    self._lost_at_s.setdefault(proc.gpu_index, t_s)
                lost_at = self._lost_at_s.get(proc.gpu_index)
                if lost_at is not None and proc.state != "Z":
                    # Its GPU fell off the bus: the worker dies of it, even when the board is reset
                    # (`FakeGpu.reset_board`) before it has exited, and is never on the board again.
                    if t_s >= lost_at + self.exit_delay_s:
                        proc.state = "Z"
                        proc.exit_status = EXIT_STATUS_ONE
                        proc.exited_at_s = t_s
                        gpu.processes = []
                    elif not gpu.lost:
                        gpu.processes = []
                        continue
                if proc.state == "Z":
                    if proc.exited_at_s is not None and t_s >= proc.exited_at_s + self.reap_s:
                        proc.gone_at_s = t_s
                    continue
                gpu.processes = [FakeGpuProcess(pid=proc.pid, used_bytes=used, sm_pct=gpu.util_gpu_pct,
                                                mem_pct=gpu.util_mem_pct)]
                gpu.process_sample_us = int(t_s * 1_000_000) + 1
                gpu.mem_used_bytes = min(gpu.mem_total_bytes, DRIVER_RESERVE_BYTES + used)
                proc.state = "R" if gpu.util_gpu_pct > 50 else "S"
        self._checkpoint(node, ran_s)

    def _checkpoint(self, node: SimNode, ran_s: float) -> None:
        """Mark the checkpoints due by ``ran_s`` seconds into the job, while every worker runs."""
        if not self.checkpoint_every_s:
            return
        workers = [p for p in self.processes if p.gpu_index is not None]
        # A rank whose GPU was lost is dying (or dead), even once its board is reset.
        if not workers or any(p.state == "Z" or p.gone_at_s is not None or p.gpu_index in self._lost_at_s
                              or self.gpus.gpus[p.gpu_index].lost for p in workers if p.gpu_index is not None):
            return
        due = int(ran_s // self.checkpoint_every_s)
        while self._checkpoints < due:
            self._checkpoints += 1
            node.marks.append((f"epoch {self._checkpoints} checkpoint", self.user))

    def _launch(self, node: SimNode) -> None:
        ticks = int(node.bus.get("uptime_s", 3600.0 + node.t_s) * USER_HZ)
        self.processes.append(SimProcess(pid=self.launcher_pid, ppid=1, uid=self.uid, start_ticks=ticks,
                                         argv=("/opt/conda/bin/python3", "/opt/conda/bin/torchrun",
                                               f"--nproc-per-node={len(self.gpus.gpus)}", *self.argv[2:])))
        for gpu in self.gpus.gpus:
            if gpu.lost:
                continue
            self.processes.append(SimProcess(pid=self.first_pid + gpu.index, ppid=self.launcher_pid, uid=self.uid,
                                             argv=self.argv, start_ticks=ticks + 35, gpu_index=gpu.index))

    def write(self, tree: Tree) -> None:
        if not self._user_added:
            add_user(tree, self.user, self.uid)
            self._user_added = True
        if not self.in_agent_namespace:
            return
        for proc in self.processes:
            base = f"/proc/{proc.pid}"
            if proc.gone_at_s is not None:
                if self._written.pop(proc.pid, None) is not None:
                    tree.remove(base)
                continue
            if self._written.get(proc.pid) == proc.state:
                continue
            first = proc.pid not in self._written
            self._written[proc.pid] = proc.state
            tree.write(f"{base}/stat", proc_stat_line(proc))
            tree.write(f"{base}/status", proc_status(proc, self.user))
            if proc.state == "Z":
                # A zombie has released its memory and files: empty cmdline, no fds.
                tree.write(f"{base}/cmdline", b"")
                tree.remove(f"{base}/fd")
                tree.remove(f"{base}/fdinfo")
                continue
            if first:
                tree.write(f"{base}/cmdline", "\0".join(proc.argv).encode() + b"\0")
                for fd, target in enumerate(("/dev/null", f"/dev/pts/{proc.pid % 8}", f"/dev/pts/{proc.pid % 8}")):
                    tree.symlink(f"{base}/fd/{fd}", target)
                    tree.write(f"{base}/fdinfo/{fd}", "pos:\t0\nflags:\t0100002\nmnt_id:\t25\nino:\t5\n")
                if proc.gpu_index is not None:
                    for fd, target in ((7, "/dev/nvidiactl"), (8, f"/dev/nvidia{proc.gpu_index}"), (9, "/dev/nvidia-uvm")):
                        tree.symlink(f"{base}/fd/{fd}", target)
                        tree.write(f"{base}/fdinfo/{fd}", "pos:\t0\nflags:\t0102002\nmnt_id:\t26\nino:\t812\n")

    def close(self) -> None:
        """Nothing to release."""


@dataclass
class SimAmdJob:
    """A training process on an AMD GPU (ROCm PyTorch): its ``/proc`` entry and the DRM fdinfo
    of its render node, whose ``drm-engine-gfx`` busy time follows the GPU's busy percentage and
    whose memory keys the GPU's VRAM and GTT in use (on a Strix Halo box most of it GTT). Add it
    after the GPU.
    """

    gpu: SimAmdGpu
    start_s: float = 5.0
    user: str = "dave"
    uid: int = 1000
    pid: int = 5151
    argv: tuple[str, ...] = ("/home/dave/venv/bin/python3", "train.py", "--model", "qwen2.5-7b", "--bf16")
    client_id: int = 11
    busy_ns: int = 0
    started: bool = False
    _proc: SimProcess | None = None
    _user_added: bool = False

    def advance(self, node: SimNode, t_s: float, dt_s: float) -> None:
        if t_s < self.start_s:
            return
        if self._proc is None:
            ticks = int(node.bus.get("uptime_s", 3600.0 + node.t_s) * USER_HZ)
            self._proc = SimProcess(pid=self.pid, ppid=1, uid=self.uid, argv=self.argv, start_ticks=ticks, state="R")
        self.busy_ns += int(self.gpu.busy_pct / 100.0 * dt_s * 1e9)

    def write(self, tree: Tree) -> None:
        if not self._user_added:
            # The user exists before the job starts (an agent reads user names once a minute).
            add_user(tree, self.user, self.uid)
            self._user_added = True
        proc = self._proc
        if proc is None:
            return
        base = f"/proc/{proc.pid}"
        if not self.started:
            self.started = True
            tree.write(f"{base}/stat", proc_stat_line(proc))
            tree.write(f"{base}/status", proc_status(proc, self.user))
            tree.write(f"{base}/cmdline", "\0".join(proc.argv).encode() + b"\0")
            tree.symlink(f"{base}/fd/0", "/dev/null")
            tree.write(f"{base}/fdinfo/0", "pos:\t0\nflags:\t0100002\nmnt_id:\t25\nino:\t5\n")
            tree.symlink(f"{base}/fd/5", "/dev/dri/renderD128")
        # amdgpu's fdinfo (Linux 6.11+): one DRM client per open render node; per region the common
        # keys, then amdgpu's legacy drm-memory-* (its resident figures) and its own amd-* keys.
        vram, gtt = self.gpu.vram_used_bytes // 1024, self.gpu.gtt_used_bytes // 1024
        regions = "".join(f"drm-total-{name}:\t{kib} KiB\ndrm-shared-{name}:\t0\ndrm-resident-{name}:\t{kib} KiB\n"
                          f"drm-purgeable-{name}:\t0\n" for name, kib in (("cpu", 0), ("gtt", gtt), ("vram", vram)))
        tree.write(f"{base}/fdinfo/5", (
            f"pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t1073\ndrm-driver:\tamdgpu\n"
            f"drm-client-id:\t{self.client_id}\ndrm-pdev:\t{self.gpu.bus_id}\npasid:\t32770\n{regions}"
            f"drm-memory-vram:\t{vram} KiB\ndrm-memory-gtt:\t{gtt} KiB\ndrm-memory-cpu:\t0 KiB\n"
            f"amd-memory-visible-vram:\t{vram} KiB\namd-evicted-vram:\t0 KiB\namd-evicted-visible-vram:\t0 KiB\n"
            f"amd-requested-vram:\t{vram} KiB\namd-requested-visible-vram:\t{vram} KiB\namd-requested-gtt:\t{gtt} KiB\n"
            f"drm-engine-gfx:\t{self.busy_ns} ns\ndrm-engine-compute:\t0 ns\ndrm-engine-dma:\t0 ns\n"))

    def close(self) -> None:
        """Nothing to release."""


@dataclass
class SimPidNamespace:
    """The PID namespace of the /proc the agent reads: ``/proc/1/ns/pid`` (PID 1's), and the agent's
    own entry ``/proc/self`` (its ``ns/pid`` link and status). Add it before the jobs.

    The host's by default. With ``container`` a container's own (``docker run`` without
    ``--pid=host``): ``processes`` are the container's (their PIDs may be numbers NVML lists for
    host processes), and the jobs run on the host (``SimDdpJob(in_agent_namespace=False)``).
    Without ``first_readable`` the ``/proc/1/ns/pid`` link is not there, as for an agent that
    may not ptrace PID 1 (reading it answers EACCES).
    """

    container: bool = False
    inode: int = 4026532513
    agent_pid: int = 2187
    first_readable: bool = True
    processes: list[SimProcess] = field(default_factory=list)
    _written: bool = False

    def advance(self, node: SimNode, t_s: float, dt_s: float) -> None:
        """Nothing moves: a namespace lasts as long as the node."""

    def write(self, tree: Tree) -> None:
        if self._written:
            return
        self._written = True
        link = f"pid:[{self.inode if self.container else INIT_PID_NS_INODE}]"
        if self.first_readable:
            tree.symlink("/proc/1/ns/pid", link)
        agent = SimProcess(pid=self.agent_pid, ppid=0 if self.agent_pid == 1 else 1, uid=0, start_ticks=500,
                           argv=("/usr/bin/python3", "/usr/local/bin/rigmon", "agent"))
        for proc in [agent, *self.processes]:
            base = f"/proc/{proc.pid}"
            tree.write(f"{base}/stat", proc_stat_line(proc))
            tree.write(f"{base}/status", proc_status(proc, "root"))
            tree.write(f"{base}/cmdline", "\0".join(proc.argv).encode() + b"\0")
        tree.symlink(f"/proc/{self.agent_pid}/ns/pid", link)
        tree.symlink("/proc/self", str(self.agent_pid))

    def close(self) -> None:
        """Nothing to release."""
