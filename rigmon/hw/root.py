"""HostRoot: every /proc, /sys and /dev read, relative to one configurable root directory."""

from __future__ import annotations

import errno
import os
from pathlib import Path

#: Upper bound for one attribute read; sysfs attributes are at most a page, but /proc
#: files such as stat, diskstats or mdstat grow with the machine.
MAX_READ_BYTES = 4 * 1024 * 1024
#: A first read of an attribute shorter than this is all of it (see `HostRoot.read_attr`).
WHOLE_ATTR_BYTES = 1024

# Errors that mean "this attribute is not available right now" rather than a bug:
# the file vanished (device unplugged), the device is gone (ENODEV/ENXIO), the driver
# cannot answer without blocking (EAGAIN), or refuses the read for this device (EINVAL,
# EIO, EOPNOTSUPP are common for hwmon and PCIe attributes of a dying device).
_ABSENT_ERRNOS = {
    errno.ENOENT,
    errno.ENOTDIR,
    errno.ENODEV,
    errno.ENXIO,
    errno.EAGAIN,
    errno.EINVAL,
    errno.EIO,
    errno.EOPNOTSUPP,
    errno.ENODATA,
}


class HostRoot:
    """Reads the machine's files below ``root`` (``/`` on a real node, a tree in tests).

    Args:
        root: directory that stands for ``/``.
    """

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        self.root = Path(root)
        # Reads join strings: building a pathlib.Path per read was a third of a collector's
        # time (hundreds of attribute reads a second).
        self._prefix = str(self.root).rstrip("/") + "/"

    @property
    def is_real_root(self) -> bool:
        """Whether this is the machine's own ``/`` (udev events describe only that one)."""
        return self.root.resolve() == Path("/")

    def path(self, rel: str) -> Path:
        """Return the real path of ``rel`` (an absolute-looking path such as ``/proc/stat``)."""
        return self.root / rel.lstrip("/")

    def _real(self, rel: str) -> str:
        """``path(rel)`` as a string, for the reads."""
        return self._prefix + rel.lstrip("/")

    def read_attr(self, rel: str, max_bytes: int = MAX_READ_BYTES) -> str | None:
        """Read a text attribute without blocking, stripped of surrounding white space.

        Some hwmon and driver attributes block or return EAGAIN; the file is opened with
        O_NONBLOCK and read once up to ``max_bytes``.

        Returns:
            The text, or ``None`` when the attribute is absent or unreadable right now.
        """
        raw = self._read(rel, max_bytes, WHOLE_ATTR_BYTES)
        if raw is None:
            return None
        return raw.decode("utf-8", "replace").strip()

    def read_text(self, rel: str, max_bytes: int = MAX_READ_BYTES) -> str | None:
        """Like `read_attr` but keeps the text as is (for multi-line /proc files)."""
        raw = self.read_bytes(rel, max_bytes)
        return None if raw is None else raw.decode("utf-8", "replace")

    def read_bytes(self, rel: str, max_bytes: int = MAX_READ_BYTES) -> bytes | None:
        """Read raw bytes (see `read_attr`); ``None`` when absent."""
        return self._read(rel, max_bytes, 0)

    def _read(self, rel: str, max_bytes: int, whole_below: int) -> bytes | None:
        """Read up to ``max_bytes``; a first read shorter than ``whole_below`` ends it.

        A sysfs attribute is produced whole by its first read (one value, at most a page),
        so the read that would return nothing is skipped for short ones, as node_exporter's
        procfs does. Multi-line /proc files come through seq_file a page at a time, where a
        short read is not the end: `read_text` and `read_bytes` read until nothing comes.
        """
        try:
            fd = os.open(self._real(rel), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno in _ABSENT_ERRNOS or exc.errno == errno.EACCES:
                return None
            raise
        try:
            chunks: list[bytes] = []
            remaining = max_bytes
            while remaining > 0:
                chunk = os.read(fd, min(remaining, 65536))
                if not chunk:
                    break
                if not chunks and len(chunk) < whole_below:
                    return chunk
                chunks.append(chunk)
                remaining -= len(chunk)
            return b"".join(chunks)
        except OSError as exc:
            if exc.errno in _ABSENT_ERRNOS:
                return None
            raise
        finally:
            os.close(fd)

    def listdir(self, rel: str) -> list[str]:
        """Sorted entries of a directory; empty when it does not exist."""
        try:
            return sorted(os.listdir(self._real(rel)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def exists(self, rel: str) -> bool:
        """Whether ``rel`` exists below the root."""
        return os.path.exists(self._real(rel))

    def realpath(self, rel: str) -> str | None:
        """``rel`` with every symlink resolved, as a path below the root (``/sys/devices/...``).

        ``None`` when it does not exist or resolves outside the root (sysfs links are
        relative, so a tree copied from a machine resolves within itself).
        """
        root = os.path.realpath(self.root)
        try:
            real = os.path.realpath(self._real(rel), strict=True)
        except OSError:
            return None
        if real == root:
            return "/"
        if not real.startswith(root.rstrip("/") + "/"):
            return None
        return "/" + os.path.relpath(real, root)

    def readlink(self, rel: str) -> str | None:
        """Target of a symlink (sysfs device links), ``None`` when absent."""
        try:
            return os.readlink(self._real(rel))
        except OSError:
            return None
