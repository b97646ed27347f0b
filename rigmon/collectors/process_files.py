"""Parsers of the process files the GPU processes collector reads: ``/proc/PID/{stat,status,cmdline}``,
``/proc/stat``'s boot time, ``/etc/passwd``, and a DRM client's ``/proc/PID/fdinfo/FD``.

Pure: text in, values out, no I/O and no clock. The collector is `rigmon.collectors.gpu_processes`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from signal import Signals

from rigmon.collectors.sysfs_values import U64_MAX, parse_int

#: Kernel clock ticks per second of /proc/PID/stat times (USER_HZ, 100 on every Linux ABI).
USER_HZ = 100
#: Field numbers (1-based, as proc(5) counts them) of /proc/PID/stat.
STAT_STARTTIME = 22
STAT_EXIT_CODE = 52
#: KiB in the fdinfo memory keys.
KIB = 1024
#: Longest short command line kept (the full one is kept whole, up to the read limit).
MAX_COMMAND_CHARS = 200
#: Bit of a wait status set when the signal that ended the process dumped core (WCOREFLAG).
CORE_DUMPED = 0x80
#: Inode number of the initial (the host's) PID namespace in ``/proc/PID/ns/pid`` links: the
#: kernel's fixed ``PROC_PID_INIT_INO`` (0xEFFFFFFC, since Linux 3.8); any other is a container's.
INIT_PID_NS_INODE = 0xEFFFFFFC


@dataclass(frozen=True, slots=True)
class ProcStat:
    """What /proc/PID/stat says: state letter, start time in ticks since boot, and the
    wait status of a zombie (``exit_code``, Linux 3.5+; ``None`` while running)."""

    comm: str
    state: str
    start_ticks: int | None
    exit_status: int | None


#: The memory regions of a DRM client whose buffers the GPU uses: ``vram`` (on an APU the BIOS's
#: carve-out of system memory) and ``gtt`` (system memory mapped into the GPU's address space: on
#: an APU such as Strix Halo, where most of a job's memory is). Not ``cpu``: buffers the GPU cannot
#: reach until they move back (swapped out, evicted to system memory).
GPU_MEMORY_REGIONS = ("vram", "gtt")


@dataclass(frozen=True, slots=True)
class DrmClient:
    """One DRM file descriptor's fdinfo: driver, device, client id, busy nanoseconds, and the bytes
    its buffers take in VRAM and in GTT (resident: with memory behind them; ``None`` when not said)."""

    driver: str
    pdev: str | None
    client_id: str | None
    engine_ns: dict[str, int]
    vram_bytes: int | None
    gtt_bytes: int | None = None

    @property
    def gpu_mem_bytes(self) -> int | None:
        """The memory the client holds for the GPU: VRAM and GTT together (a buffer is resident in one
        region at a time, so neither counts another's), ``None`` when neither is said."""
        known = [n for n in (self.vram_bytes, self.gtt_bytes) if n is not None]
        total = sum(known)
        return total if known and total <= U64_MAX else None


def parse_proc_stat(text: str) -> ProcStat | None:
    """Parse ``/proc/PID/stat``; ``None`` when it is not one."""
    # 4242 (python train.py) S 1 4242 ... (comm may hold spaces and parentheses: split at the last ')')
    head, sep, tail = text.rpartition(")")
    if not sep or "(" not in head:
        return None
    comm = head.split("(", 1)[1]
    fields = tail.split()
    if not fields:
        return None
    offset = 3  # fields[0] is field 3 (state)

    def number(n: int) -> int | None:
        i = n - offset
        return parse_int(fields[i]) if i < len(fields) else None

    state = fields[0]
    return ProcStat(comm=comm, state=state, start_ticks=number(STAT_STARTTIME),
                    exit_status=number(STAT_EXIT_CODE) if state in ("Z", "X") else None)


def parse_status_uid(text: str) -> int | None:
    """The real UID from ``/proc/PID/status``."""
    for line in text.splitlines():
        # Uid:	1000	1000	1000	1000   (real, effective, saved, filesystem)
        if line.startswith("Uid:"):
            parts = line.split()
            if len(parts) > 1 and parts[1].isdigit():
                return parse_int(parts[1])
    return None


def parse_status_nspid(text: str) -> tuple[int, ...]:
    """The ``NSpid`` line of ``/proc/PID/status`` (Linux 4.1+): the process's PID in the namespace of
    the procfs it was read from, then in each namespace nested below it down to its own; empty
    when the line is missing."""
    for line in text.splitlines():
        # NSpid:	27394	1
        if line.startswith("NSpid:"):
            numbers = [parse_int(part) if part.isdigit() else None for part in line.split()[1:]]
            return tuple(n for n in numbers if n is not None) if None not in numbers else ()
    return ()


def parse_pid_ns_link(link: str | None) -> int | None:
    """The namespace inode of a ``/proc/PID/ns/pid`` link's target (``pid:[4026531836]``)."""
    if link is None or not link.startswith("pid:[") or not link.endswith("]"):
        return None
    number = link[5:-1]
    return parse_int(number) if number.isdigit() else None


def procfs_shows_host_pids(first_ns: str | None, self_ns: str | None, self_status: str | None) -> bool | None:
    """Whether a procfs mount shows the host's PID namespace, in which NVML's PIDs are (the driver
    knows no other): ``False`` for a container's own /proc, where PID 4242 is another process.

    The procfs's namespace is its PID 1's (``first_ns``: the ``/proc/1/ns/pid`` link, unreadable
    without ptrace rights over PID 1). Without it: the reader's own namespace (``self_ns``) when
    ``self_status``'s NSpid line has one number (the procfs is of the reader's namespace). A reader
    nested below the procfs's namespace (a host /proc bind-mounted into a container) cannot tell.

    Returns:
        ``True`` the host's, ``False`` another, ``None`` not known.
    """
    first = parse_pid_ns_link(first_ns)
    if first is not None:
        return first == INIT_PID_NS_INODE
    own = parse_pid_ns_link(self_ns)
    if own is None or len(parse_status_nspid(self_status or "")) != 1:
        return None
    return own == INIT_PID_NS_INODE


def parse_cmdline(raw: bytes) -> tuple[str, ...]:
    """Arguments of ``/proc/PID/cmdline`` (NUL-separated; empty for a kernel thread or zombie)."""
    text = raw.decode("utf-8", "replace")
    return tuple(arg for arg in text.split("\0") if arg) if text else ()


#: The Python interpreter's options that take their value as the next argument (``python3 -X faulthandler
#: train.py``); ``-m`` and ``-c`` end the options.
PYTHON_VALUE_OPTIONS = frozenset({"-W", "-X", "--check-hash-based-pycs"})
#: Longest first statement of ``python -c CODE`` kept in the short command.
MAX_CODE_CHARS = 32


def short_command(argv: Sequence[str]) -> str | None:
    """The program without its directory and what it runs: ``python3 train.py``, ``python3 -m vllm.entrypoints``.

    Interpreters' options are left out (the full command line is kept beside it); the first
    non-option argument (a script, shown without its directory) or ``-m module`` ends it; for Python,
    ``-c`` ends it too with the code's first statement (``python -c import torch``; a multiprocessing
    spawn worker is ``python3 (multiprocessing worker)``), and the value of ``-X``/``-W`` is no script.
    """
    if not argv:
        return None
    words = [os.path.basename(argv[0]) or argv[0]]
    python = words[0].startswith("python")
    args = list(argv[1:])
    while args:
        arg = args.pop(0)
        if arg == "-m" and args:
            words += ["-m", args[0]]
            break
        if python and arg == "-c":
            # python -c 'import torch; ...': the program is the code, not a script's name; its first statement
            # says what it is. torch.multiprocessing.spawn's workers run multiprocessing's code.
            if "--multiprocessing-fork" in args:
                return f"{words[0]} (multiprocessing worker)"
            first = args[0].strip().split(";")[0].strip() if args else ""
            words += ["-c", first if len(first) <= MAX_CODE_CHARS else first[: MAX_CODE_CHARS - 1] + "…"]
            break
        if python and arg in PYTHON_VALUE_OPTIONS and args:
            args.pop(0)  # -X faulthandler, -W ignore: the option's value, not the script
            continue
        if not arg.startswith("-"):
            words.append(os.path.basename(arg.rstrip("/")) or arg)
            break
    text = " ".join(words)
    return text if len(text) <= MAX_COMMAND_CHARS else text[: MAX_COMMAND_CHARS - 1] + "…"


def parse_passwd(text: str) -> dict[int, str]:
    """UID -> user name from ``/etc/passwd``."""
    users: dict[int, str] = {}
    for line in text.splitlines():
        # alice:x:1000:1000:Alice,,,:/home/alice:/bin/bash
        parts = line.split(":")
        if len(parts) >= 3 and parts[2].isdigit() and (uid := parse_int(parts[2])) is not None:
            users.setdefault(uid, parts[0])
    return users


def parse_boot_time(text: str) -> float | None:
    """Boot time (Unix seconds) from the ``btime`` line of ``/proc/stat``."""
    for line in text.splitlines():
        # btime 1700000000
        if line.startswith("btime "):
            value = line.split()[1]
            seconds = parse_int(value) if value.isdigit() else None
            return None if seconds is None else float(seconds)
    return None


def parse_drm_fdinfo(text: str) -> DrmClient | None:
    """The DRM keys of one ``/proc/PID/fdinfo/FD``; ``None`` for a file that is not a DRM client."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        # drm-engine-gfx:	1234567 ns
        key, sep, value = line.partition(":")
        if sep and key.startswith("drm-"):
            values[key] = value.strip()
    driver = values.get("drm-driver")
    if driver is None:
        return None
    engines: dict[str, int] = {}
    for key, value in values.items():
        if key.startswith("drm-engine-") and not key.startswith("drm-engine-capacity-"):
            number = value.split()[0] if value else ""
            if number.isdigit() and (ns := parse_int(number)) is not None:
                engines[key.removeprefix("drm-engine-")] = ns
    vram, gtt = (_region_bytes(values, region) for region in GPU_MEMORY_REGIONS)
    return DrmClient(driver=driver, pdev=values.get("drm-pdev"), client_id=values.get("drm-client-id"),
                     engine_ns=engines, vram_bytes=vram, gtt_bytes=gtt)


def _region_bytes(values: dict[str, str], region: str) -> int | None:
    """Bytes of a client's buffers resident in ``region``, from its fdinfo keys.

    drm-usage-stats: ``drm-resident-<region>`` is what has memory behind it; ``drm-memory-<region>``
    (amdgpu before Linux 6.11, and since then beside the common keys) is its deprecated alias;
    ``drm-total-<region>`` also counts buffers without memory yet (or evicted), taken only when neither
    is there. Not amdgpu's ``amd-requested-*``: a buffer that may go in VRAM or GTT is in both.
    """
    for key in (f"drm-resident-{region}", f"drm-memory-{region}", f"drm-total-{region}"):
        if key in values:
            return _size_bytes(values[key])
    return None


def _size_bytes(value: str) -> int | None:
    # "1048576 KiB" (or MiB / bare bytes)
    parts = value.split()
    if not parts or not parts[0].isdigit():
        return None
    unit = parts[1] if len(parts) > 1 else ""
    scale = {"": 1, "KiB": KIB, "MiB": KIB**2, "GiB": KIB**3}.get(unit)
    number = parse_int(parts[0])
    if scale is None or number is None or number * scale > U64_MAX:
        return None
    return number * scale


def exit_text(status: int | None) -> str:
    """Words for a zombie's wait status: `` (exit code 1)``, `` (killed by SIGKILL, signal 9)`` (the
    OOM killer's, or ``kill -9``), `` (killed by SIGSEGV, signal 11, core dumped)``, or nothing known.

    The signal's name is this machine's (the agent reads its own node's processes).
    """
    if status is None:
        return ""
    number = status & 0x7F
    if not number:
        return f" (exit code {(status >> 8) & 0xFF})"
    try:
        name = f"{Signals(number).name}, "
    except ValueError:  # a real-time signal past SIGRTMIN has no name of its own
        name = ""
    core = ", core dumped" if status & CORE_DUMPED else ""
    return f" (killed by {name}signal {number}{core})"
