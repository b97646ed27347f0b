"""GPU processes collector: who holds each GPU, how much of its memory, and when they come and go.

NVIDIA processes come from NVML's running-process lists (compute and graphics) with their
used GPU memory and, where the driver samples them, per-process utilisation; AMD processes
from the DRM fdinfo files of ``/proc/PID/fdinfo`` (``drm-driver: amdgpu``, as nvtop reads
them). Each process is joined with ``/proc/PID/{stat,status,cmdline}`` below the agent's root, its
command line's secrets redacted (`rigmon.redact_cmdline`).
A PID that NVML lists but the agent's ``/proc`` does not show (another PID namespace, such as
a container, or a process that just exited) is reported with what NVML gives; so is every NVML
PID when that ``/proc`` is not the host's PID namespace (an agent in a container without the
host's PIDs): NVML's PIDs are the host's, and the same number there is another process. The
parsers of those files are `rigmon.collectors.process_files`, their reading
`rigmon.collectors.proc_lookup`, and the events `rigmon.collectors.gpu_process_events`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from msgspec.structs import replace

from rigmon.clock import Clock
from rigmon.collectors.base import (
    CollectorContext,
    CollectorError,
    CollectorHung,
    CollectorStarting,
    NoData,
    PushFn,
)
from rigmon.collectors.gpu_process_events import exit_visible, left_event, started_event
from rigmon.collectors.nvidia_bus import NvidiaBus
from rigmon.collectors.proc_lookup import NOT_VISIBLE, ProcInfo, ProcLookup
from rigmon.collectors.process_files import (
    DrmClient,
    parse_cmdline as parse_cmdline,
    parse_drm_fdinfo as parse_drm_fdinfo,
    parse_passwd as parse_passwd,
    parse_proc_stat as parse_proc_stat,
    parse_status_uid as parse_status_uid,
    short_command as short_command,
)
from rigmon.hw.nvml import (
    NvmlGpuProcesses,
    NvmlHung,
    NvmlProcesses,
    NvmlStarting,
    NvmlUnavailable,
    open_nvml_processes,
)
from rigmon.hw.root import HostRoot
from rigmon.rates import CounterRates
from rigmon.redact_cmdline import redact_argv
from rigmon.schema import GpuProcessReading

#: PCI vendor id of AMD GPUs.
AMD_VENDOR = "0x1002"
#: Seconds between two scans of a process's open files for DRM render nodes: a process seen
#: for the first time is scanned at once, one already scanned again only after this long (a
#: node runs hundreds of processes with dozens of descriptors each; the DRM ones of a known
#: client are re-read on every poll).
FD_RESCAN_S = 10.0
#: Nanoseconds in a second (DRM fdinfo engine times are in ns).
NANO = 1e9
#: Seconds without a new NVML utilisation sample after which a process's last one is no longer its
#: utilisation: NVML samples a process only while it runs on the GPU, so one gone idle (training done,
#: memory still held) gives none, and its last figure would stay (nvidia-smi pmon shows "-" for it).
#: Well above a sampling period, so a sample that comes a poll late keeps the figure.
UTIL_STALE_S = 10.0


Key = tuple[str, int, int]
"""A process on a GPU: (vendor, GPU index or AMD card number, PID)."""


class GpuProcessCollector:
    """Processes on NVIDIA (NVML) and AMD (DRM fdinfo) GPUs, with start and exit events.

    A process is keyed by its GPU and PID. When it leaves a GPU's list the collector looks
    at ``/proc/PID``: gone or a zombie means ``gpu_process_exited`` (a zombie's exit code
    when the kernel still holds it); still running means ``gpu_process_released``. A PID the
    agent's /proc never showed (another PID namespace, a hidden entry) says nothing of the process:
    it left the GPU, ``gpu_process_left``, and may run on. A PID another
    process took since the last poll (another start time) is the first one's exit. While
    a GPU cannot be listed (lost, hung driver) its last processes stay listed as long as they
    run (or, not visible, may run), without memory figures; on a node with AMD GPUs as well, so do all NVIDIA GPUs' while
    NVML does not answer (driver unloaded, hung), which `status_note` says. No start events are
    made for the processes found by the first poll, or by NVML's first answer (they were running
    before the agent).

    Args:
        nvml: the NVML process seam.
        root: the machine's files (/proc, /sys, /etc/passwd).
        clock: wall time for events, monotonic time for fdinfo busy rates.
    """

    name = "gpu_processes"

    def __init__(self, nvml: NvmlProcesses, root: HostRoot, clock: Clock) -> None:
        self.nvml = nvml
        self.root = root
        self.clock = clock
        #: The NVIDIA GPUs on the PCI bus (read when NVML cannot start).
        self._bus = NvidiaBus(root)
        self._known: dict[Key, GpuProcessReading] | None = None
        self._util_since: dict[int, int] = {}
        self._utils: dict[tuple[int, int], tuple[float | None, float | None]] = {}
        #: When (monotonic seconds) each process's newest utilisation sample came.
        self._util_at: dict[tuple[int, int], float] = {}
        self._rates = CounterRates()
        self._drm_fds: dict[int, tuple[str, ...]] = {}
        self._scanned_at: dict[int, float] = {}
        #: The processes' /proc entries.
        self._procs = ProcLookup(root)
        #: GPU UUID -> the index its processes are listed under (`_gpu_index`), and NVML index ->
        #: the UUID last answered there.
        self._indices: dict[str, int] = {}
        self._uuid_at: dict[int, str] = {}
        #: Why NVML did not answer the last poll while AMD GPUs were listed (``None``: it did, or there is no NVML).
        self._nvml_trouble: str | None = None
        #: Whether NVML has listed processes once.
        self._nvml_listed = False

    # -- polling ----------------------------------------------------------------------

    def collect(self) -> Sequence[object]:
        amd_cards = self._amd_cards()
        nvidia = self._nvidia(others=bool(amd_cards))
        nvml_first = nvidia is not None and not self._nvml_listed
        self._nvml_listed = self._nvml_listed or nvidia is not None
        if nvidia is None and not amd_cards:
            raise NoData("no NVIDIA driver and no amdgpu card")
        boot_at, users = self._procs.host_facts()
        ticks_before = self._procs.begin_poll()
        now: dict[Key, GpuProcessReading] = {}
        unlisted: set[tuple[str, int]] = set()
        answered: set[int] = set()
        for gpu in nvidia or ():
            index = self._gpu_index(gpu)
            answered.add(index)
            if not gpu.listed:
                unlisted.add(("nvidia", index))
            for reading in self._nvidia_readings(gpu, index, boot_at, users):
                now[("nvidia", index, reading.pid)] = reading
        if nvidia is not None:
            # A GPU gone from NVML's device count (off the bus) cannot be listed either.
            unlisted.update(("nvidia", index) for index in self._indices.values() if index not in answered)
        elif self._nvml_trouble is not None:
            # NVML does not answer: none of its GPUs can be listed.
            unlisted.update(("nvidia", index) for index in self._indices.values())
            unlisted.update((vendor, index) for vendor, index, _ in self._known or () if vendor == "nvidia")
        if amd_cards:
            for key, reading in self._amd_readings(amd_cards, boot_at, users).items():
                now[key] = reading
        records: list[object] = []
        known = self._known
        if known is not None:
            for key, before in known.items():
                if key in now:
                    if self._procs.same_process(key[2], ticks_before):
                        continue
                    # Its PID and GPU are another process's now: it exited between two polls.
                    records.append(left_event(before, NOT_VISIBLE, alive=False))
                    continue
                info = self._procs.look_up(key[0], key[2], boot_at)
                if not self._procs.same_process(key[2], ticks_before):
                    # Another process took the PID since: this one is gone, its exit status with it.
                    info = NOT_VISIBLE
                alive = info.visible and info.state not in ("Z", "X")
                # A PID the agent's /proc never showed (a host PID seen from another namespace) may well still run.
                unknown = not exit_visible(before, info)
                if (alive or unknown) and (key[0], key[1]) in unlisted:
                    # The GPU cannot be listed (lost): the process still runs and still holds it.
                    now[key] = replace(before, gpu_mem_bytes=None, util_pct=None, mem_util_pct=None,
                                       state=info.state)
                    continue
                records.append(left_event(before, info, alive))
            for key, reading in now.items():
                if key[0] == "nvidia" and nvml_first:
                    continue  # NVML answers for the first time: its processes ran before
                if key not in known or not self._procs.same_process(key[2], ticks_before):
                    records.append(started_event(reading))
        self._known = now
        self._procs.forget({key[2] for key in now})
        readings: list[GpuProcessReading] = sorted(
            now.values(), key=lambda r: (r.vendor, r.gpu_index or 0, r.pci_bus_id or "", r.pid))
        records.extend(readings)
        return records

    def status_note(self) -> str | None:
        """What does not work while the processes are listed: NVML not answering on a node with AMD
        GPUs, and an agent whose /proc is not the host's PID namespace."""
        notes = []
        if self._nvml_trouble is not None:
            notes.append(self._nvml_trouble)
        if self._procs.foreign_pid_ns is not None:
            notes.append(f"command not visible (agent in another PID namespace, {self._procs.foreign_pid_ns}, "
                         "than the host's, whose PIDs NVML gives): run the agent in the host's (docker run --pid=host)")
        return "; ".join(notes) or None

    def _nvidia(self, others: bool) -> list[NvmlGpuProcesses] | None:
        """Every NVIDIA GPU's processes; ``None`` without NVML, or while it does not answer and
        ``others`` (AMD GPUs) are listed: then NVML's failure is `status_note`'s, not the collector's."""
        self._nvml_trouble = None
        try:
            # One hand-off to NVML's watchdog thread for every GPU, not one per GPU and one for the count.
            out = self.nvml.read_all_processes(self._util_since)
            for data in out:
                if data.utils:
                    self._util_since[data.index] = max(u.timestamp_us for u in data.utils)
            return out
        except NvmlUnavailable as exc:
            # As the GPU collector: NVIDIA GPUs on the bus that NVML cannot read (a driver/library
            # version mismatch after an update without a reboot) are a failure, not an absence.
            unread = self._bus.unread(str(exc))
            if unread is not None and not others:
                raise CollectorError(unread) from None
            if unread is not None or self._indices:
                # A driver unloaded under a running agent: NVML listed GPUs, and lists none now.
                self._nvml_trouble = f"NVML not answering ({unread or exc}): NVIDIA processes kept as last listed"
            # Asked again next time, as the GPU collector does: the driver may load after the agent.
            return None
        except NvmlStarting as exc:
            raise CollectorStarting(str(exc)) from None
        except NvmlHung as exc:
            if not others:
                raise CollectorHung(str(exc)) from None
            self._nvml_trouble = f"NVML not answering ({exc}): NVIDIA processes kept as last listed"
            return None

    def _gpu_index(self, gpu: NvmlGpuProcesses) -> int:
        """The index the GPU collector gives GPU ``gpu``: the NVML index it had when first seen.

        NVML's indices move up when a GPU before them leaves the device count; the GPU collector
        keeps each GPU (by UUID) at its first index, and so are its processes listed. A GPU new
        since takes its NVML index, or the next free one when another GPU holds that. A GPU that
        cannot be read (lost: no UUID) is the one last seen at its NVML index.
        """
        uuid = gpu.uuid if gpu.uuid is not None else self._uuid_at.get(gpu.index)
        if uuid is None:
            return gpu.index
        self._uuid_at[gpu.index] = uuid
        index = self._indices.get(uuid)
        if index is None:
            used = set(self._indices.values())
            index = gpu.index if gpu.index not in used else max(used) + 1
            self._indices[uuid] = index
        return index

    def _nvidia_readings(self, gpu: NvmlGpuProcesses, index: int, boot_at: float | None,
                         users: dict[int, str]) -> Iterable[GpuProcessReading]:
        now_s = self.clock.monotonic()
        for sample in gpu.utils:
            self._utils[(index, sample.pid)] = (
                None if sample.sm_pct is None else float(sample.sm_pct),
                None if sample.mem_pct is None else float(sample.mem_pct),
            )
            self._util_at[(index, sample.pid)] = now_s
        pids = {p.pid for p in gpu.processes}
        for stale in [k for k in self._utils if k[0] == index
                      and (k[1] not in pids or now_s - self._util_at.get(k, now_s) > UTIL_STALE_S)]:
            # Gone from the GPU, or no sample for a while: idle on it, its last figure no longer true.
            del self._utils[stale]
            self._util_at.pop(stale, None)
        # Said in each reading as well as in `status_note`'s words: the dashboard reads the reading.
        other_ns = self._procs.foreign_pid_ns is not None
        for proc in gpu.processes:
            info = self._procs.look_up("nvidia", proc.pid, boot_at)
            util, mem_util = self._utils.get((index, proc.pid), (None, None))
            yield self._reading(info, proc.pid, "nvidia", users, gpu_index=index, gpu_uuid=gpu.uuid,
                                kind=proc.kind, gpu_mem_bytes=proc.used_bytes, util_pct=util, mem_util_pct=mem_util,
                                agent_other_pid_ns=other_ns)

    def _amd_cards(self) -> dict[str, int]:
        """PCI address -> card number of the amdgpu cards in sysfs."""
        cards: dict[str, int] = {}
        for name in self.root.listdir("/sys/class/drm"):
            if not name.startswith("card") or not name[4:].isdigit():
                continue
            if self.root.read_attr(f"/sys/class/drm/{name}/device/vendor") != AMD_VENDOR:
                continue
            real = self.root.realpath(f"/sys/class/drm/{name}/device")
            if real is not None:
                cards[os.path.basename(real)] = int(name[4:])
        return cards

    def _amd_readings(self, cards: dict[str, int], boot_at: float | None,
                      users: dict[int, str]) -> dict[Key, GpuProcessReading]:
        out: dict[Key, GpuProcessReading] = {}
        now_s = self.clock.monotonic()
        pids = [int(entry) for entry in _listdir(self.root, "/proc") if entry.isdigit()]
        for gone in set(self._scanned_at) - set(pids):
            self._scanned_at.pop(gone, None)
            self._drm_fds.pop(gone, None)
        for pid in pids:
            scanned_at = self._scanned_at.get(pid)
            if scanned_at is None or now_s - scanned_at >= FD_RESCAN_S or now_s < scanned_at:
                self._scanned_at[pid] = now_s
                self._drm_fds[pid] = self._scan_drm_fds(pid)
            fds = self._drm_fds.get(pid, ())
            if not fds:
                continue
            clients = self._drm_clients(pid, fds)
            by_card: dict[str, list[DrmClient]] = {}
            for client in clients:
                if client.driver == "amdgpu" and client.pdev in cards:
                    by_card.setdefault(client.pdev, []).append(client)
            if not by_card:
                continue
            info = self._procs.read(pid, boot_at)
            for pdev, group in by_card.items():
                held = [c.gpu_mem_bytes for c in group if c.gpu_mem_bytes is not None]
                busy_ns = sum(c.engine_ns.get("gfx", 0) + c.engine_ns.get("compute", 0) for c in group)
                rate = self._rates.rate(("amd", pdev, pid), busy_ns, now_s)
                util = None if rate is None else round(min(100.0, max(0.0, rate / NANO * 100.0)), 1)
                out[("amd", cards[pdev], pid)] = self._reading(
                    info, pid, "amd", users, pci_bus_id=pdev, kind="drm",
                    gpu_mem_bytes=sum(held) if held else None, util_pct=util)
        return out

    def _scan_drm_fds(self, pid: int) -> tuple[str, ...]:
        """The descriptors of a process whose link points into /dev/dri (render and card nodes)."""
        fds = []
        for fd in _listdir(self.root, f"/proc/{pid}/fd"):
            target = self.root.readlink(f"/proc/{pid}/fd/{fd}")
            if target is not None and target.startswith("/dev/dri/"):
                fds.append(fd)
        return tuple(fds)

    def _drm_clients(self, pid: int, fds: Sequence[str]) -> list[DrmClient]:
        """The DRM clients of a process from the fdinfo of its DRM descriptors."""
        seen: set[tuple[str | None, str | None]] = set()
        clients: list[DrmClient] = []
        for fd in fds:
            client = parse_drm_fdinfo(self.root.read_text(f"/proc/{pid}/fdinfo/{fd}") or "")
            if client is None:
                continue
            # Several fds (dup, fork) of one open file are one client: count it once.
            ident = (client.pdev, client.client_id)
            if client.client_id is not None and ident in seen:
                continue
            seen.add(ident)
            clients.append(client)
        return clients

    @staticmethod
    def _reading(info: ProcInfo, pid: int, vendor: str, users: dict[int, str], **fields: object) -> GpuProcessReading:
        # Redacted here, before anything is made of it: a job's tokens and passwords on its command line
        # (--hf-token=..., HF_TOKEN=... python ...) would reach frames, the journal, /metrics' command
        # label, events and snapshots, and no consumer could take them back out.
        argv = redact_argv(info.argv)
        command = short_command(argv) or (f"[{info.comm}]" if info.comm else None)
        return GpuProcessReading(
            pid=pid, vendor=vendor,  # type: ignore[arg-type]
            in_namespace=info.visible, user=None if info.uid is None else users.get(info.uid, str(info.uid)),
            uid=info.uid, command=command, cmdline=" ".join(argv) if argv else None,
            started_at=info.started_at, state=info.state,
            **fields,  # type: ignore[arg-type]
        )

    def start(self, push: PushFn) -> None:
        """Polled: nothing to start."""

    def close(self) -> None:
        """Shut NVML down."""
        self.nvml.close()


def _listdir(root: HostRoot, rel: str) -> list[str]:
    # /proc/PID/fd of another user's process is not listable (EACCES) unless the agent may
    # ptrace it: those processes are simply not seen through fdinfo.
    try:
        return root.listdir(rel)
    except OSError:
        return []


def make_gpu_process_collector(ctx: CollectorContext) -> GpuProcessCollector:
    """Registry factory: NVML bound to this agent's root, like the GPU collector's."""
    return GpuProcessCollector(open_nvml_processes(ctx.root, ctx.config.gpu.nvml_timeout_s), ctx.root, ctx.clock)
