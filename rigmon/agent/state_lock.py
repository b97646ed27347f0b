"""The state directory's lock: one agent owns a state directory (its journal and alarm state).

Two agents on one state directory both journalled into one file, and the second reported a
false critical ``unclean_shutdown`` about the first, which was alive. The agent now holds an
exclusive `fcntl.flock` on ``<state_dir>/agent.lock`` for as long as it runs, and past its stop
while a journal writer left in a stuck disk write lives (the kernel drops it when the process
ends, however it ends); the file holds the owner's pid, so a second agent can say whose it is.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_FILE = "agent.lock"


class StateDirInUse(Exception):
    """Another live agent holds the state directory; the message names its pid."""


class StateLock:
    """An exclusive lock on a state directory, held until `release`.

    Args:
        state_dir: the directory; created when missing, with the directories above it (mode 700),
            as the agent starts: a first start may name a new one. (The journal, later, makes
            only the directory itself, and never again once it was removed while the agent ran.)

    Raises:
        StateDirInUse: another process holds it.
    """

    def __init__(self, state_dir: str | Path) -> None:
        self.path = Path(state_dir) / LOCK_FILE
        self._fd: int | None = None
        try:
            os.makedirs(state_dir, mode=0o700, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            # The journal reports an unusable state directory itself (and keeps the agent sampling).
            log.warning("cannot lock state directory %s: %s", state_dir, exc.strerror)
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
            log.warning("cannot lock state directory %s: %s", state_dir, exc.strerror)
            return
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    @property
    def held(self) -> bool:
        """Whether this process holds the lock."""
        return self._fd is not None

    def release(self) -> None:
        """Give the lock up (the file stays; its pid is stale until the next owner writes its own)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
