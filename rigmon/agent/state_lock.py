"""The state directory's lock: one agent owns a state directory (its journal and alarm state).

Two agents on one state directory both journalled into one file, and the second reported a
false critical ``unclean_shutdown`` about the first, which was alive. The agent now holds an
exclusive `fcntl.flock` on ``<state_dir>/agent.lock`` for as long as it runs, and past its stop
while a journal writer left in a stuck disk write lives (the kernel drops it when the process
ends, however it ends); the file holds the owner's pid, so a second agent can say whose it is.

Once it serves, the owner adds where (`StateLock.record_listening`): its URL, token file and
certificate, so ``rigmon check`` on the same state directory asks that agent for the rail, even
one started with ``--listen`` or ``--token-file`` that its configuration file does not name
(`listening_agent`). The record goes when the lock is given up.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_FILE = "agent.lock"


@dataclass(frozen=True)
class Listening:
    """Where the agent owning a state directory serves, as recorded in its lock file.

    Attributes:
        url: ``http://HOST:PORT`` or ``https://...`` as reachable from this machine (a wildcard
            address stands for loopback).
        token_file: its read token's file, ``""`` without one.
        tls_cert_file: its certificate, ``""`` without TLS.
    """

    url: str
    token_file: str = ""
    tls_cert_file: str = ""


class StateDirError(Exception):
    """The state directory cannot be this agent's: nothing was started."""


class StateDirInUse(StateDirError):
    """Another live agent holds the state directory; the message names its pid."""


class StateDirUnusable(StateDirError):
    """The state directory cannot be made or written in at start: a file there or above it, no
    permission (not a fault of the disk: see `DISK_FAULTS`).

    Attributes:
        path: the state directory.
        reason: why, without the path (``exists and is not a directory``).
    """

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"state directory {self.path}: {reason}")


class StateLock:
    """An exclusive lock on a state directory, held until `release`.

    Args:
        state_dir: the directory; created when missing, with the directories above it (mode 700),
            as the agent starts: a first start may name a new one. (The journal, later, makes
            only the directory itself, and never again once it was removed while the agent ran.)

    Raises:
        StateDirInUse: another process holds it.
        StateDirUnusable: it cannot be made, or written in. Only here, at the start: the agent
            refuses to run without its flight recorder, lock and alarm state. A directory that
            becomes unusable later (a full disk, removed) is the journal's to report, and the
            agent keeps sampling.
    """

    def __init__(self, state_dir: str | Path) -> None:
        self.path = Path(state_dir) / LOCK_FILE
        self._fd: int | None = None
        fd = _open_lock_file(Path(state_dir), self.path)
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            owner = _read_pid(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                if owner == os.getpid():
                    # Not another agent to stop: an agent of this process, or one stopped here whose
                    # journal writer, left in a stuck disk write, keeps the lock until it ends.
                    raise StateDirInUse(
                        f"state directory {state_dir} is still locked by this process (pid {owner}, holding "
                        f"{self.path}): by another agent in it, or by one stopped here until its journal "
                        "writer, left in a stuck disk write, has ended") from None
                who = f"pid {owner}" if owner else "another process"
                raise StateDirInUse(
                    f"state directory {state_dir} is in use by another rigmon agent ({who}, holding {self.path}); "
                    "stop it, or give this agent its own --state-dir") from None
            # A file system without locks (ENOLCK): the directory is usable, unlocked.
            log.warning("cannot lock state directory %s: %s", state_dir, exc.strerror)
            return
        self._fd = fd
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError as exc:  # a full disk: the lock holds, a second agent cannot name its owner
            log.warning("cannot write this agent's pid to %s: %s", self.path, exc.strerror)

    @property
    def held(self) -> bool:
        """Whether this process holds the lock."""
        return self._fd is not None

    def record_listening(self, where: Listening) -> None:
        """Add where this agent serves to the lock file (after its pid), for `listening_agent`; nothing
        when the lock is not held. A write that fails is logged: ``rigmon check`` then asks the address
        its own configuration names."""
        if self._fd is None:
            return
        try:
            _rewrite(self._fd, f"{os.getpid()}\n{json.dumps(asdict(where))}\n")
        except OSError as exc:
            log.warning("cannot record where this agent listens in %s: %s", self.path, exc.strerror)

    def release(self) -> None:
        """Give the lock up (the file stays with the pid alone, stale until the next owner writes its own:
        the address it served on is taken out first)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                _rewrite(self._fd, f"{os.getpid()}\n")
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


#: Faults of the disk, not of the configuration: met at the start as later, they leave the agent
#: sampling, and the journal reports them in every frame (a node whose disk went read-only or full
#: must still be watched, and restarting it, by hand or by systemd, must not end that).
DISK_FAULTS = frozenset({errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EIO})


def _open_lock_file(state_dir: Path, path: Path) -> int | None:
    """Make ``state_dir`` (and the directories above it) when missing and open its lock file;
    ``None`` (logged) when a disk fault (`DISK_FAULTS`) stops it.

    Raises:
        StateDirUnusable: the configuration names no usable directory, saying why. (It was a
            warning in the log, and the agent ran on with no journal, no lock and no alarm state.)
    """
    try:
        os.makedirs(state_dir, mode=0o700, exist_ok=True)
        if not os.access(state_dir, os.W_OK | os.X_OK):
            # Checked, not met at the open: a lock file left there opens, the journal's files do not.
            read_only = os.statvfs(state_dir).f_flag & os.ST_RDONLY
            code = errno.EROFS if read_only else errno.EACCES
            raise OSError(code, f"cannot write in it: {os.strerror(code)}")
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        raise StateDirUnusable(state_dir, "exists and is not a directory") from None
    except OSError as exc:
        if exc.errno in DISK_FAULTS:
            log.warning("cannot lock state directory %s: %s", state_dir, exc.strerror)
            return None
        if exc.errno == errno.ENOTDIR:
            reason = "cannot be made: a path above it is not a directory"
        elif exc.filename is None:
            reason = exc.strerror or str(exc)
        elif Path(exc.filename) == path:
            reason = f"cannot open its lock file {path.name}: {exc.strerror}"
        else:
            reason = f"cannot be made: {exc.strerror}"
        raise StateDirUnusable(state_dir, reason) from None


#: Bytes of the lock file read back: the pid and the address record.
MAX_LOCK_FILE_BYTES = 16384


def listening_agent(state_dir: str | Path) -> Listening | None:
    """Where the live agent owning ``state_dir`` serves, from its lock file; ``None`` when no agent
    recorded one, when its pid is gone (a crashed agent's record is stale), or when the file cannot be
    read (another user's state directory).

    The lock itself is not tried: taking it, even shared and for an instant, would turn away an agent
    starting on the directory at that instant.
    """
    try:
        with open(Path(state_dir) / LOCK_FILE, "rb") as file:
            text = file.read(MAX_LOCK_FILE_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    pid_line, _, record = text.partition("\n")
    if not pid_line.strip().isdigit() or not _alive(int(pid_line)):
        return None
    try:
        fields = json.loads(record)
        where = Listening(**fields) if isinstance(fields, dict) else None
    except (ValueError, TypeError):
        return None
    if where is None or not all(isinstance(v, str) for v in asdict(where).values()) or not where.url:
        return None
    return where


def _alive(pid: int) -> bool:
    if pid <= 0:  # 0 and -1 would ask about process groups
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _rewrite(fd: int, text: str) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode(), 0)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").partition("\n")[0].strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def flock_held(locks: str, dev: int, ino: int) -> bool:
    """Whether ``/proc/locks``' text ``locks`` lists a ``FLOCK`` on the file ``dev``/``ino`` (its
    ``MAJ:MIN:INODE`` column: major and minor in hex, the inode in decimal)."""
    key = f"{os.major(dev):02x}:{os.minor(dev):02x}:{ino}"
    for line in locks.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 18713 fe:00:2146658 0 EOF"; a waiter's line has "->" after the number.
        if "FLOCK" in fields[1:3] and key in fields:
            return True
    return False


def agent_holds(state_dir: str | Path) -> bool:
    """Whether an agent of this machine holds ``state_dir``'s lock now (it runs, or is stopping), as
    ``/proc/locks`` lists it: the lock is not tried (see `listening_agent`), and no pid is trusted (a
    journal's disk mounted on another machine may name a pid alive there by chance). ``False`` when
    nothing says so: no lock file, no ``/proc/locks``."""
    try:
        st = os.stat(Path(state_dir) / LOCK_FILE)
        with open("/proc/locks", encoding="ascii", errors="replace") as file:
            locks = file.read()
    except OSError:
        return False
    return flock_held(locks, st.st_dev, st.st_ino)
