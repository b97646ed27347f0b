"""What the agent's /proc says of a GPU's process: its state, user, command line and start time.

Used by the GPU processes collector (`rigmon.collectors.gpu_processes`) for NVIDIA and AMD
processes alike: ``/proc/PID/{stat,status,cmdline}`` below the agent's root, the node's boot
time and user names, and whether that ``/proc`` is the host's PID namespace (NVML's PIDs are
the host's). The parsers of those files are `rigmon.collectors.process_files`.
"""

from __future__ import annotations

from dataclasses import dataclass

from rigmon.collectors.process_files import (
    USER_HZ,
    parse_boot_time,
    parse_cmdline,
    parse_passwd,
    parse_proc_stat,
    parse_status_uid,
    procfs_shows_host_pids,
)
from rigmon.hw.root import HostRoot

#: Longest /proc/PID/cmdline read.
MAX_CMDLINE_BYTES = 16384
#: Polls between two reads of what does not change while a process lives (its user and command
#: line, read again when its PID is reused: another start time) and of the node's boot time and
#: user names. A process that rewrites its own argv, or a user added to /etc/passwd, shows
#: within this many polls.
FACTS_EVERY = 60


@dataclass(frozen=True, slots=True)
class ProcInfo:
    """What /proc says of one PID (all ``None`` when it is not visible)."""

    visible: bool
    state: str | None = None
    uid: int | None = None
    argv: tuple[str, ...] = ()
    started_at: float | None = None
    exit_status: int | None = None
    comm: str | None = None


#: A PID /proc does not show (another PID namespace, hidden, gone).
NOT_VISIBLE = ProcInfo(visible=False)


class ProcLookup:
    """Reads processes from the agent's /proc, keeping what does not change while a process lives.

    Each poll begins with `begin_poll` (the start times read by the poll before are handed back
    for `same_process`), reads the node's facts with `host_facts`, and each process with
    `look_up` or `read`; `forget` drops the kept facts of processes no longer held.

    Args:
        root: the machine's files (/proc, /etc/passwd).
    """

    def __init__(self, root: HostRoot) -> None:
        self.root = root
        #: PID -> ((start ticks, name), uid, argv, polls left): /proc/PID/status and cmdline, read once per
        #: process image (the kernel's name of it in /proc/PID/stat changes with an exec or a setproctitle).
        self._proc_facts: dict[int, tuple[tuple[int | None, str], int | None, tuple[str, ...], int]] = {}
        self._host_facts: tuple[float | None, dict[int, str]] | None = None
        self._host_polls_left = 0
        #: PID -> its process's start time (ticks since boot) in /proc/PID/stat, of this poll's reads.
        self._ticks: dict[int, int | None] = {}
        #: The /proc/1/ns/pid link when the root's /proc is not the host's PID namespace (NVML's PIDs'):
        #: NVML's PIDs are then not looked up there. Read with the host facts.
        self.foreign_pid_ns: str | None = None

    def begin_poll(self) -> dict[int, int | None]:
        """Start a poll: the start times the last poll read, by PID (for `same_process`)."""
        ticks_before, self._ticks = self._ticks, {}
        return ticks_before

    def host_facts(self) -> tuple[float | None, dict[int, str]]:
        """The node's boot time and user names, read every `FACTS_EVERY` polls (neither changes
        within a boot but for an added user, and /proc/stat grows with the CPU count), and whether
        /proc is the host's PID namespace (`foreign_pid_ns`)."""
        self._host_polls_left -= 1
        if self._host_facts is None or self._host_polls_left <= 0:
            self._host_facts = (parse_boot_time(self.root.read_text("/proc/stat") or ""),
                                parse_passwd(self.root.read_text("/etc/passwd") or ""))
            self._host_polls_left = FACTS_EVERY
            first_ns, own_ns = self.root.readlink("/proc/1/ns/pid"), self.root.readlink("/proc/self/ns/pid")
            host = procfs_shows_host_pids(first_ns, own_ns, self.root.read_text("/proc/self/status"))
            # Not known (a host /proc bind-mounted into a container): it is looked up as the host's.
            self.foreign_pid_ns = (first_ns or own_ns or "?") if host is False else None
        return self._host_facts

    def look_up(self, vendor: str, pid: int, boot_at: float | None) -> ProcInfo:
        """What /proc says of a GPU's process: nothing of an NVML PID when /proc is another PID
        namespace than the host's (that number is another process there, or none)."""
        if vendor == "nvidia" and self.foreign_pid_ns is not None:
            return NOT_VISIBLE
        return self.read(pid, boot_at)

    def read(self, pid: int, boot_at: float | None) -> ProcInfo:
        """What /proc says of PID ``pid`` (in the namespace of the root's /proc)."""
        stat_text = self.root.read_text(f"/proc/{pid}/stat")
        stat = None if stat_text is None else parse_proc_stat(stat_text)
        if stat is None:
            return NOT_VISIBLE
        self._ticks[pid] = stat.start_ticks
        started = None
        if boot_at is not None and stat.start_ticks is not None:
            started = round(boot_at + stat.start_ticks / USER_HZ, 2)
        # The stat line (state, exit code) is read on every poll; the user and the command line
        # once per process (same PID, same start time) and then every FACTS_EVERY polls, or at once
        # when the process's name in the stat line changed (it exec'd another program, or renamed
        # itself as setproctitle does: its command line is another).
        identity = (stat.start_ticks, stat.comm)
        facts = self._proc_facts.get(pid)
        if facts is not None and facts[0] == identity and facts[3] > 0:
            self._proc_facts[pid] = (facts[0], facts[1], facts[2], facts[3] - 1)
            uid, argv = facts[1], facts[2]
        else:
            # Either may vanish between two reads (the process exits): each is optional, and
            # only a complete read is kept.
            status = self.root.read_text(f"/proc/{pid}/status")
            raw = self.root.read_bytes(f"/proc/{pid}/cmdline", MAX_CMDLINE_BYTES)
            uid = None if status is None else parse_status_uid(status)
            argv = parse_cmdline(raw or b"")
            if status is not None and raw is not None:
                self._proc_facts[pid] = (identity, uid, argv, FACTS_EVERY)
        return ProcInfo(visible=True, state=stat.state, uid=uid, argv=argv, started_at=started,
                        exit_status=stat.exit_status, comm=stat.comm)

    def same_process(self, pid: int, ticks_before: dict[int, int | None]) -> bool:
        """Whether PID ``pid`` is the process it was at the last poll: one that took the PID since
        started at another time (ticks since boot, which a clock step does not move). The same where
        either poll could not read it (a container's PID, a process gone)."""
        before, now = ticks_before.get(pid), self._ticks.get(pid)
        return before is None or now is None or before == now

    def forget(self, held: set[int]) -> None:
        """Drop the kept facts of every PID but ``held`` (the processes still on a GPU)."""
        for gone in [pid for pid in self._proc_facts if pid not in held]:
            del self._proc_facts[gone]
