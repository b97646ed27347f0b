"""KmsgReader: reads kernel log records from /dev/kmsg (or a plain file of records) under a root."""

from __future__ import annotations

import errno
import os
import select
import stat
import time

from rigmon.hw.root import HostRoot

#: /dev/kmsg returns one record per read and fails with EINVAL if the buffer is smaller.
RECORD_BUFFER_BYTES = 16384
#: Most records one `KmsgReader.read_records` call returns (a burst waits for the next call).
MAX_RECORDS_PER_READ = 4096
#: How often a plain file is checked for new records (the simulator's kernel log).
FILE_POLL_S = 0.05


class KmsgUnavailable(Exception):
    """The kernel log cannot be opened: absent (``missing``) or not permitted."""

    def __init__(self, message: str, missing: bool) -> None:
        super().__init__(message)
        self.missing = missing


class KmsgReader:
    """Reads raw records from the kernel log below ``root``.

    On a real node ``/dev/kmsg`` is a character device: each ``read()`` returns exactly one
    record, ``EAGAIN`` means no more, and ``EPIPE`` means records were overwritten before
    they were read (counted in `lost`). The simulator writes a plain file of the same
    records instead (one per line, continuation lines starting with a space), which is
    tailed by offset.

    Args:
        root: the machine's files.
        rel: path of the kernel log below the root.
    """

    def __init__(self, root: HostRoot, rel: str = "/dev/kmsg") -> None:
        self.root = root
        self.rel = rel
        self.lost = 0
        self._fd: int | None = None
        self._is_device = False
        self._offset = 0
        self._partial = b""

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
        if from_end:
            # SEEK_END on /dev/kmsg positions after the newest record.
            self._offset = os.lseek(fd, 0, os.SEEK_END)
        else:
            self._offset = 0
        self._partial = b""

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
                record = os.read(self._fd, RECORD_BUFFER_BYTES)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    # Overwritten before we read them; the position moved to the oldest record.
                    self.lost += 1
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
        chunks = []
        while True:
            chunk = os.pread(self._fd, 1 << 20, self._offset)
            if not chunk:
                break
            chunks.append(chunk)
            self._offset += len(chunk)
        data = self._partial + b"".join(chunks)
        end = data.rfind(b"\n")
        if end < 0:
            self._partial = data
            return []
        self._partial = data[end + 1 :]
        records: list[bytes] = []
        for line in data[: end + 1].splitlines(keepends=True):
            # Continuation lines (" SUBSYSTEM=pci") belong to the record before them.
            if line.startswith(b" ") and records:
                records[-1] += line
            else:
                records.append(line)
        return records

    def wait(self, timeout_s: float) -> None:
        """Block until a record may be available or ``timeout_s`` passed."""
        if self._fd is None or not self._is_device:
            time.sleep(min(timeout_s, FILE_POLL_S))
            return
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.poll(int(timeout_s * 1000))

    def close(self) -> None:
        """Close the log."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
