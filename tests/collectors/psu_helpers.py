"""Test helpers for the PSU rail: a serial device on a real pseudo-terminal, push capture, waiting."""

from __future__ import annotations

import os
import threading
import time
import tty
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

LINK = "/dev/serial/by-id/usb-rigmon_test-if00"


class PtyDevice:
    """A serial device on a real pty, linked at LINK below ``root`` like udev's by-id link.

    `unplug` closes the pty and removes the link (the agent's reads fail with EIO);
    `replug` makes a new pty, possibly with another /dev/pts number.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.link = root / LINK.lstrip("/")
        self.master: int | None = None
        self.slave: int | None = None
        self.replug()

    def replug(self) -> None:
        master, slave = os.openpty()
        tty.setraw(slave)
        self.master, self.slave = master, slave
        self.link.parent.mkdir(parents=True, exist_ok=True)
        if self.link.is_symlink():
            self.link.unlink()
        os.symlink(os.ttyname(slave), self.link)

    def unplug(self) -> None:
        if self.link.is_symlink():
            self.link.unlink()
        for fd in (self.master, self.slave):
            if fd is not None:
                os.close(fd)
        self.master = self.slave = None

    def write(self, data: bytes | str) -> None:
        assert self.master is not None
        raw = data.encode() if isinstance(data, str) else data
        while raw:
            written = os.write(self.master, raw)
            raw = raw[written:]

    def lines(self, *lines: str) -> None:
        self.write("".join(f"{line}\r\n" for line in lines))

    def read_host(self) -> bytes:
        """What the host wrote to the device so far."""
        assert self.master is not None
        os.set_blocking(self.master, False)
        try:
            return os.read(self.master, 4096)
        except BlockingIOError:
            return b""
        finally:
            os.set_blocking(self.master, True)

    def close(self) -> None:
        self.unplug()


@pytest.fixture
def pty_device(tmp_path: Path) -> Iterator[PtyDevice]:
    device = PtyDevice(tmp_path)
    yield device
    device.close()


class Pushed:
    """Collects what a collector pushes, thread-safely."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.records: list[object] = []

    def __call__(self, records: object) -> None:
        with self._lock:
            self.records.extend(records)  # type: ignore[call-overload]

    def of(self, kind: type) -> list[object]:
        with self._lock:
            return [r for r in self.records if isinstance(r, kind)]


def wait_for(condition: Callable[[], object], timeout_s: float = 10.0) -> None:
    """Poll ``condition`` until it is true; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("condition not met in time")
