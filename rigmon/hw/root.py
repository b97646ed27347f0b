"""HostRoot: every /proc, /sys and /dev read, relative to one configurable root directory."""

from __future__ import annotations

import errno
import os
import resource
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from rigmon.hw.absent import ABSENT_ERRNOS, open_or_none
from rigmon.hw.kept_fds import CHURNS, MAX_KEPT_FDS, KeptFds
from rigmon.hw.mounts import REREADABLE_FS, own_rereadable_devices, rereadable_devices
from rigmon.hw.read_scope import SCOPE, ReadScope, read_scope

__all__ = ["MAX_KEPT_FDS", "MAX_READ_BYTES", "REREADABLE_FS", "WHOLE_ATTR_BYTES", "HostRoot", "ReadScope",
           "read_scope", "rereadable_devices"]

T = TypeVar("T")
E = TypeVar("E", str, tuple[str, int])

#: Upper bound for one attribute read; sysfs attributes are at most a page, but /proc
#: files such as stat, diskstats or mdstat grow with the machine.
MAX_READ_BYTES = 4 * 1024 * 1024
#: A first read of an attribute shorter than this is all of it (see `HostRoot.read_attr`).
WHOLE_ATTR_BYTES = 1024
#: Bytes asked for by one read system call.
_CHUNK_BYTES = 65536
#: Top-level directories below a root whose files may be kept open when they are on a sysfs or
#: procfs mount (`REREADABLE_FS`).
_REREADABLE_DIRS = ("/sys/", "/proc/")


class HostRoot:
    """Reads the machine's files below ``root`` (``/`` on a real node, a tree in tests).

    Files that the kernel generates on every read (sysfs attributes, procfs files: those below
    ``/sys`` and ``/proc`` that are on a sysfs or procfs mount) are opened once and then read
    with ``pread`` at offset 0, which makes the kernel produce them afresh: an open and a close
    fewer per attribute and tick. Only reads in a read scope keep a descriptor (`read_scope`: the
    sampler's ticks, which read the same files every second); a thread that reads now and then
    (the kernel log's, on a line naming a device; the event loop's, at start) opens and closes, so
    it never holds the file of a device that went away since. Each thread keeps its own
    descriptors (at most `MAX_KEPT_FDS`, the oldest closed first), so no descriptor is ever closed
    under another thread's read. A kept
    file that fails to read (ENODEV: its device was unplugged; ESRCH: its process was reaped) or
    reads empty is closed and read again by its path, so a vanished file is absent at once and a
    replugged device's new file is read.

    A root whose ``/sys`` or ``/proc`` is a plain directory (a fixture tree, the simulator's tree)
    takes the same path for the regular files on that directory's filesystem, with one check
    more: such a tree replaces a file by rename (`rigmon.sim.tree.Tree`) or removes it, never
    rewrites it in place (a ``pwrite`` is not atomic against a concurrent ``pread`` on ext4 or
    tmpfs, whose reads take no inode lock). After each ``pread`` of a kept tree file, ``fstat``
    says whether the file still has a name (``st_nlink``): if it has none, it was replaced or
    removed, possibly before the read, so it is closed and read again by its path. A file with
    a name after the read had it during the read, so what was read is what an open at that
    moment would have read: never a torn or a stale file. (Directories of a tree are removed,
    not moved away with their files: a file under a renamed directory keeps its name.) A file
    found replaced is opened for every read from then on (while the thread remembers it): the
    kept descriptor was the old file's last reference, and the close that frees it costs the
    reader what the writer's rename would have (on ext4, hundreds of microseconds).

    Args:
        root: directory that stands for ``/``.
        keep_fds: keep descriptors of kernel-generated files open (see above).
    """

    def __init__(self, root: str | os.PathLike[str] = "/", keep_fds: bool = True) -> None:
        self.root = Path(root)
        # Reads join strings: building a pathlib.Path per read was a third of a collector's
        # time (hundreds of attribute reads a second).
        self._prefix = str(self.root).rstrip("/") + "/"
        self._keep_fds = keep_fds
        self._rereadable: frozenset[int] | None = None
        #: Top directories whose files may be kept open (see `_find_kept_dirs`), found at the first read.
        self._kept_dirs: tuple[str, ...] | None = None
        #: Devices of the top directories that are plain directories of a tree (see the class docstring).
        self._tree_devices: frozenset[int] = frozenset()
        self._local = threading.local()
        #: Last bytes read and what they parsed to, by path, parser and decoding (see `read_parsed`).
        self._parsed: dict[tuple[str, Callable[[str], object], str], tuple[bytes, object]] = {}
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        self._max_kept = MAX_KEPT_FDS if soft == resource.RLIM_INFINITY else min(MAX_KEPT_FDS, soft // 8)

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

    def read_present(self, rel: str, max_bytes: int = MAX_READ_BYTES) -> str | None:
        """Read a text attribute as `read_attr` does, telling a file that is not there from one
        that failed to read.

        A reading that fails (EIO, ENODATA, EAGAIN: a sensor present but not answering now) is
        ``None``, read again at the next call; a file that does not exist (an hwmon input removed
        when its driver unbinds the sensor) raises, so that a caller that planned to read it every
        tick looks again at what the device has instead. Only a read that fails costs more: a
        ``stat`` of the path (a read that opened nothing, or whose kept descriptor's file was
        removed, falls back to the path, so the ``stat`` says what the read found).

        Raises:
            FileNotFoundError: when ``rel`` does not exist (now).
        """
        raw = self._read(rel, max_bytes, WHOLE_ATTR_BYTES)
        if raw is not None:
            return raw.decode("utf-8", "replace").strip()
        if not self.exists(rel):
            raise FileNotFoundError(errno.ENOENT, "no such attribute", rel)
        return None

    def read_text(self, rel: str, max_bytes: int = MAX_READ_BYTES, errors: str = "replace") -> str | None:
        """Like `read_attr` but keeps the text as is (for multi-line /proc files).

        Args:
            errors: how bytes that are not UTF-8 are decoded: ``replace`` (U+FFFD), or
                ``surrogateescape`` for a file that holds names of directory entries (the
                interfaces of /proc/net/dev): a name then reads as `listdir` gives it, and
                names the same path (``sys/class/net/<name>``). Records carry such a name
                as `rigmon.hw.names.text_name` gives it; frames mend any other such text
                (`rigmon.agent.frame_json.valid_text`).
        """
        raw = self.read_bytes(rel, max_bytes)
        return None if raw is None else raw.decode("utf-8", errors)

    def read_bytes(self, rel: str, max_bytes: int = MAX_READ_BYTES) -> bytes | None:
        """Read raw bytes (see `read_attr`); ``None`` when absent."""
        return self._read(rel, max_bytes, 0)

    def read_parsed(self, rel: str, parse: Callable[[str], T], max_bytes: int = MAX_READ_BYTES,
                    errors: str = "replace") -> T | None:
        """Read a file as `read_text` does and return ``parse(text)``, reusing the last result of
        ``parse`` on this file when the file reads the same bytes as then.

        The file is read every time (never an old reading); only the parse is skipped. Several
        collectors parse the same /proc file in one tick (/proc/diskstats for disks and md
        arrays), and some files rarely change (/proc/mdstat). The result is shared by every
        caller that read the same bytes: treat it as read-only. An exception of ``parse``
        propagates and nothing is remembered.

        Args:
            errors: how bytes that are not UTF-8 are decoded, as for `read_text`
                (``surrogateescape`` for a file that names block devices: /proc/diskstats,
                /proc/mdstat). A parse is shared only by callers that decode the same way.

        Returns:
            The parse, or ``None`` when the file is absent or unreadable right now.
        """
        raw = self._read(rel, max_bytes, 0)
        if raw is None:
            return None
        key = (rel, parse, errors)
        last = self._parsed.get(key)
        if last is not None and last[0] == raw:
            return last[1]  # type: ignore[return-value]
        parsed = parse(raw.decode("utf-8", errors))
        # One entry per file and parser, replaced whole: a reader on another thread sees the
        # old pair or the new one.
        self._parsed[key] = (raw, parsed)
        return parsed

    def _read(self, rel: str, max_bytes: int, whole_below: int) -> bytes | None:
        """Read up to ``max_bytes``; a first read shorter than ``whole_below`` ends it.

        A sysfs attribute is produced whole by its first read (one value, at most a page),
        so the read that would return nothing is skipped for short ones, as node_exporter's
        procfs does. Multi-line /proc files come through seq_file a page at a time, where a
        short read is not the end: `read_text` and `read_bytes` read until nothing comes.
        """
        path = self._prefix + rel.lstrip("/")
        scoped = SCOPE.reads
        if scoped is not None:
            done = scoped.get(path)
            if done is not None and done[0] == max_bytes and done[1] == whole_below:
                return done[2]
            raw = self._read_now(path, rel, max_bytes, whole_below, True)
            scoped[path] = (max_bytes, whole_below, raw)
            return raw
        return self._read_now(path, rel, max_bytes, whole_below, False)

    def _read_now(self, path: str, rel: str, max_bytes: int, whole_below: int, may_keep: bool) -> bytes | None:
        """`_read` without the scope: ``path`` is ``rel``'s real path; a descriptor is kept only
        when ``may_keep`` (a read in a read scope: a sampler tick's, see the class docstring)."""
        kept: KeptFds | None = getattr(self._local, "fds", None)
        churns = False
        # The kept descriptor first, inline: this is most of a tick's reads on a real node.
        if kept is not None and (entry := kept.get(path)) is not None:
            fd, checked = entry
            if fd == CHURNS:
                churns = True
            else:
                replaced = False
                try:
                    raw = os.pread(fd, min(max_bytes, _CHUNK_BYTES), 0)
                    if raw and len(raw) >= whole_below:
                        raw = self._read_rest(fd, raw, max_bytes, positional=True)
                    # A tree's file: still named after the read, so not replaced before it.
                    replaced = bool(raw) and checked and not os.fstat(fd).st_nlink
                except OSError:
                    raw = b""
                if raw and not replaced:
                    return raw
                # Gone (unplugged device, reaped process, removed tree file) or empty: read
                # it by its path again. A replaced tree file is opened for every read from
                # now on: this descriptor was its last reference, and closing it frees the
                # file (on ext4 hundreds of microseconds, the writer's cost, not a reader's).
                del kept[path]
                os.close(fd)
                if replaced:
                    churns = True
                    self._keep(path, CHURNS, True)
        kept_dirs = self._kept_dirs
        if kept_dirs is None:
            kept_dirs = self._kept_dirs = self._find_kept_dirs()
        opened = open_or_none(path)
        if opened is None:
            return None
        fd = opened
        keep: bool | None = None
        try:
            raw = os.read(fd, min(max_bytes, _CHUNK_BYTES))
            if raw and len(raw) >= whole_below:
                raw = self._read_rest(fd, raw, max_bytes, positional=False)
            if raw and may_keep and not churns and kept_dirs and rel.startswith(kept_dirs):
                keep = self._keep_kind(fd)
            return raw
        except OSError as exc:
            if exc.errno in ABSENT_ERRNOS:
                return None
            raise
        finally:
            if keep is None:
                os.close(fd)
            else:
                self._keep(path, fd, keep)

    @staticmethod
    def _read_rest(fd: int, first: bytes, max_bytes: int, positional: bool) -> bytes:
        """``first`` (the read at offset 0) and what follows it up to ``max_bytes`` or the end:
        with ``pread`` for a kept descriptor, with ``read`` for a fresh one (which may be a FIFO
        or a device that cannot seek)."""
        chunks = [first]
        offset = len(first)
        while offset < max_bytes:
            size = min(max_bytes - offset, _CHUNK_BYTES)
            chunk = os.pread(fd, size, offset) if positional else os.read(fd, size)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
        return b"".join(chunks)

    def _find_kept_dirs(self) -> tuple[str, ...]:
        """The top directories (``/sys/``, ``/proc/``) below this root whose files may be kept
        open: sysfs or procfs mounts, and plain directories of a tree (their devices noted in
        ``_tree_devices``). A top directory that is a mount of another kind (none on a real node)
        is opened for every read."""
        if not self._keep_fds:
            return ()
        self._rereadable = own_rereadable_devices()
        dirs = []
        tree_devices = set()
        root_device: int | None = None
        for top in _REREADABLE_DIRS:
            try:
                device = os.stat(self._real(top)).st_dev
                if device in self._rereadable:
                    dirs.append(top)
                    continue
                if root_device is None:
                    root_device = os.stat(self._prefix).st_dev
            except OSError:
                continue
            # A tree: the top directory is on the same filesystem as the root itself (on a real
            # node ``/sys`` and ``/proc`` are mounts, never plain directories of ``/``).
            if device == root_device:
                dirs.append(top)
                tree_devices.add(device)
        self._tree_devices = frozenset(tree_devices)
        return tuple(dirs)

    def _keep_kind(self, fd: int) -> bool | None:
        """How a just-read ``fd`` is kept: ``False`` for a file on a sysfs or procfs mount (read
        afresh at every offset-0 read), ``True`` for a regular file of a tree (checked for
        replacement after each read), ``None`` for anything else (a FIFO, a device, a file of
        another mount below /sys or /proc): not kept. One ``fstat`` per file kept."""
        info = os.fstat(fd)
        if info.st_dev in (self._rereadable or ()):
            return False
        if info.st_dev in self._tree_devices and stat.S_ISREG(info.st_mode) and info.st_nlink:
            return True
        return None

    def _keep(self, path: str, fd: int, checked: bool) -> None:
        kept: KeptFds | None = getattr(self._local, "fds", None)
        if kept is None:
            kept = self._local.fds = KeptFds()
        if len(kept) >= self._max_kept:
            oldest_fd = kept.pop(next(iter(kept)))[0]
            if oldest_fd != CHURNS:
                os.close(oldest_fd)
        kept[path] = (fd, checked)

    def kept_fds(self) -> int:
        """How many descriptors the calling thread keeps open (see the class docstring)."""
        kept: KeptFds | None = getattr(self._local, "fds", None)
        return 0 if kept is None else sum(1 for fd, _ in kept.values() if fd != CHURNS)

    def listdir(self, rel: str) -> list[str]:
        """Sorted entries of a directory; empty when it does not exist or cannot be listed (once per
        `read_scope`)."""
        return _listed(self._prefix + rel.lstrip("/"), SCOPE.listings, os.listdir)

    def listdir_inodes(self, rel: str) -> list[tuple[str, int]]:
        """Sorted entries of a directory with their inode numbers, as `listdir` (once per `read_scope`).

        The inode number comes with the listing (``d_ino``): no system call more than `listdir`. It
        tells an entry made again under the same name apart from the one that was there: a device
        registered again (a driver reloaded, a PSU's I2C client instantiated again) is a new sysfs
        node with a new inode number, where the kernel gives its ``hwmonN`` to the next one registered.
        """
        return _listed(self._prefix + rel.lstrip("/"), SCOPE.inode_listings, _entries_with_inodes)

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
        except (OSError, ValueError):
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
        except (OSError, ValueError):
            return None


def _entries_with_inodes(path: str) -> list[tuple[str, int]]:
    """The entries of directory ``path`` with their inode numbers, unsorted (see `HostRoot.listdir_inodes`)."""
    with os.scandir(path) as found:
        return [(entry.name, entry.inode()) for entry in found]


def _listed(path: str, scoped: dict[str, list[E]] | None, list_now: Callable[[str], list[E]]) -> list[E]:
    """``list_now(path)`` sorted, or what it gave earlier in the `read_scope` (``scoped``); empty when the
    directory does not exist or cannot be listed. The caller gets its own list."""
    if scoped is not None and (done := scoped.get(path)) is not None:
        return list(done)
    try:
        entries = sorted(list_now(path))
    except OSError as exc:
        if exc.errno not in ABSENT_ERRNOS:
            raise
        entries = []
    except ValueError:
        entries = []  # a NUL in a name built from a read value: no such directory
    if scoped is not None:
        scoped[path] = entries
        return list(entries)
    return entries
