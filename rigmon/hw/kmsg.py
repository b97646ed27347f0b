"""KmsgReader: reads kernel log records from /dev/kmsg (or a plain file of records) under a root."""

from __future__ import annotations

import ctypes
import errno
import os
import select
import stat
import time
from collections.abc import Callable

from rigmon.hw.root import HostRoot

#: /dev/kmsg returns one record per read and fails with EINVAL if the buffer is smaller.
RECORD_BUFFER_BYTES = 16384
#: Most records one `KmsgReader.read_records` call returns (a burst waits for the next call).
MAX_RECORDS_PER_READ = 4096
#: How often a plain file is checked for new records when inotify is not available.
FILE_POLL_S = 0.05
#: inotify (linux/inotify.h): the file was written to or truncated; flags of inotify_init1.
IN_MODIFY = 0x00000002
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
#: Most bytes of a plain file read at once.
FILE_READ_BYTES = 1 << 20
#: Longest record kept from a plain file; the kernel's own limit is far lower (about 1 KiB of
#: text), so a longer line is garbage: its start is kept, the rest dropped until the next newline.
MAX_FILE_RECORD_BYTES = RECORD_BUFFER_BYTES


class KmsgUnavailable(Exception):
    """The kernel log cannot be opened: absent (``missing``) or not permitted."""

    def __init__(self, message: str, missing: bool) -> None:
        super().__init__(message)
        self.missing = missing


class KmsgReader:
    """Reads raw records from the kernel log below ``root``.

    On a real node ``/dev/kmsg`` is a character device: each ``read()`` returns exactly one
    record, ``EAGAIN`` means no more, and ``EPIPE`` means the ring buffer overran: records
    were overwritten before they were read and the position moved on to the oldest record
    left. Each such overrun is counted in `overruns`; how many records were lost shows as a
    jump in the records' sequence numbers, which the caller counts. The simulator writes a
    plain file of the same records instead (one per line, continuation lines starting with
    a space), which is tailed by offset; a line longer than `MAX_FILE_RECORD_BYTES` is cut
    (counted in `truncated`) so a file without newlines cannot fill memory.

    Args:
        root: the machine's files.
        rel: path of the kernel log below the root.
        read: reads one record from a file descriptor (``os.read``; a test can stand in for
            the kernel's ring buffer).
    """

    def __init__(self, root: HostRoot, rel: str = "/dev/kmsg",
                 read: Callable[[int, int], bytes] = os.read) -> None:
        self.root = root
        self.rel = rel
        self.overruns = 0
        self.truncated = 0
        self._read = read
        self._fd: int | None = None
        self._is_device = False
        self._offset = 0
        self._partial = b""
        self._skipping = False
        self._notify_fd: int | None = None
        self._notify_tried = False
        self._wake: tuple[int, int] | None = None

    def open(self, from_end: bool) -> None:
        """Open the log; with ``from_end`` only records written from now on are read.

        Raises:
            KmsgUnavailable: the log is absent or not readable (``CAP_SYSLOG`` missing).
        """
        path = self.root.path(self.rel)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise KmsgUnavailable(f"{self.rel} does not exist", missing=True) from None
        except PermissionError:
            raise KmsgUnavailable(f"{self.rel}: permission denied (needs CAP_SYSLOG)", missing=False) from None
        self._fd = fd
        self._is_device = stat.S_ISCHR(os.fstat(fd).st_mode)
        # `wait` blocks until the log or `interrupt` says something changed: /dev/kmsg
        # polls readable when a record is there; a plain file (the simulator's log) is
        # watched with inotify from the first `wait` on (a reader that is only read, like
        # the GPU collector's, takes none: inotify instances are few per user, 128 by
        # default), polled every FILE_POLL_S where inotify is not available.
        self._wake = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._notify_fd, self._notify_tried = None, False
        if from_end:
            # SEEK_END on /dev/kmsg positions after the newest record.
            self._offset = os.lseek(fd, 0, os.SEEK_END)
        else:
            self._offset = 0
        self._partial = b""
        self._skipping = False

    @property
    def is_device(self) -> bool:
        """Whether the open log is a character device (/dev/kmsg), not a plain file."""
        return self._fd is not None and self._is_device

    @property
    def is_open(self) -> bool:
        """Whether `open` succeeded and `close` has not been called."""
        return self._fd is not None

    def read_records(self) -> list[bytes]:
        """Every complete record available now, without blocking (oldest first)."""
        if self._fd is None:
            return []
        return self._read_device() if self._is_device else self._read_file()

    def _read_device(self) -> list[bytes]:
        assert self._fd is not None
        out: list[bytes] = []
        while len(out) < MAX_RECORDS_PER_READ:
            try:
                record = self._read(self._fd, RECORD_BUFFER_BYTES)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    # Overwritten before we read them; the position moved to the oldest record.
                    self.overruns += 1
                    continue
                if exc.errno == errno.EAGAIN:
                    break
                raise
            if not record:
                break
            out.append(record)
        return out

    def _read_file(self) -> list[bytes]:
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        if size < self._offset:
            # Truncated or replaced: start over from the beginning.
            self._offset = 0
            self._partial = b""
            self._skipping = False
        records: list[bytes] = []
        while self._offset < size:
            # Only what was appended: a fixed large read on every poll (20 a second) would
            # allocate and shrink a big buffer each time, which fragments the C heap.
            chunk = os.pread(self._fd, min(size - self._offset, FILE_READ_BYTES), self._offset)
            if not chunk:
                break
            self._offset += len(chunk)
            self._split_lines(chunk, records)
            if len(records) >= MAX_RECORDS_PER_READ:
                break
        return records

    def _split_lines(self, chunk: bytes, records: list[bytes]) -> None:
        """Append the complete lines of ``chunk`` (after what is pending) to ``records``."""
        if self._skipping:
            # The rest of an over-long line: dropped up to its newline.
            newline = chunk.find(b"\n")
            if newline < 0:
                return
            chunk = chunk[newline + 1 :]
            self._skipping = False
        data = self._partial + chunk
        end = data.rfind(b"\n")
        self._partial = data[end + 1 :]
        if len(self._partial) > MAX_FILE_RECORD_BYTES:
            # No newline within the limit: keep the start as a record of its own, skip the rest.
            self.truncated += 1
            self._partial, self._skipping = b"", True
            data = data[: end + 1] + data[end + 1 : end + 1 + MAX_FILE_RECORD_BYTES] + b"\n"
            end = len(data) - 1
        for line in data[: end + 1].splitlines(keepends=True):
            # Continuation lines (" SUBSYSTEM=pci") belong to the record before them.
            if line.startswith(b" ") and records:
                records[-1] += line
            else:
                records.append(line)

    def wait(self, timeout_s: float) -> None:
        """Block until a record may be available, `interrupt` was called, or ``timeout_s`` passed.

        The log's own descriptor (or the file's inotify watch) wakes it, so an idle log costs
        no wake-ups; a plain file without inotify is checked every `FILE_POLL_S`.
        """
        if self._fd is None or self._wake is None:
            time.sleep(min(timeout_s, FILE_POLL_S))
            return
        if not self._is_device and not self._notify_tried:
            self._notify_tried = True
            self._notify_fd = _inotify_watch(self.root.path(self.rel))
            # What was appended before the watch existed wakes no one: look now.
            return
        poller = select.poll()
        poller.register(self._wake[0], select.POLLIN)
        watched = self._fd if self._is_device else self._notify_fd
        if watched is not None:
            poller.register(watched, select.POLLIN)
        else:
            timeout_s = min(timeout_s, FILE_POLL_S)
        for fd, _mask in poller.poll(int(timeout_s * 1000)):
            if fd != self._fd:
                # The wake pipe or the inotify queue: empty it (what changed is read next).
                _drain(fd)

    def interrupt(self) -> None:
        """Wake a thread blocked in `wait` (the collector is stopping)."""
        if self._wake is not None:
            try:
                os.write(self._wake[1], b"\0")
            except BlockingIOError:
                pass  # the pipe is full: a wake-up is pending already

    def close(self) -> None:
        """Close the log."""
        fds: list[int | None] = [self._fd, self._notify_fd, *(self._wake or ())]
        self._fd = self._notify_fd = self._wake = None
        for fd in fds:
            if fd is not None:
                os.close(fd)


def _drain(fd: int) -> None:
    """Read a non-blocking descriptor empty."""
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _inotify_watch(path: os.PathLike[str] | str) -> int | None:
    """An inotify descriptor that turns readable when ``path`` is written to; ``None`` if unavailable.

    Python has no inotify binding: the three libc calls go through ctypes. Any failure
    (no libc symbol, out of watches: ENOSPC, EMFILE) leaves the caller polling.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        init1, add_watch = libc.inotify_init1, libc.inotify_add_watch
    except (OSError, AttributeError):
        return None
    fd = int(init1(IN_NONBLOCK | IN_CLOEXEC))
    if fd < 0:
        return None
    if int(add_watch(fd, os.fsencode(path), IN_MODIFY)) < 0:
        os.close(fd)
        return None
    return fd
