"""Test helpers for the PSU rail: a serial device on a real pseudo-terminal, push capture, waiting, ADC lines,
a collector on the test link."""

from __future__ import annotations

import os
import threading
import time
import tty
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from rigmon.clock import SystemClock
from rigmon.collectors.base import EventDraft
from rigmon.collectors.psu import PsuCollector
from rigmon.collectors.psu_lines import format_rm1
from rigmon.config import PsuSection
from rigmon.hw.root import HostRoot
from rigmon.hw.tty_udev import TtyAddedFn

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

    def __call__(self, records: Sequence[object]) -> None:
        with self._lock:
            self.records.extend(records)

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


SAG = ("$RM1,seq=1841,up=1843520,win=1000,n=892,v=11712/11384/11790,i=98250/96100/131400,"
       "vpsu=11902/11655/11960,flags=4*09")


def rm1(seq: int, v: str = "12010/12001/12020", up: int | None = None, n: int = 900, extra: str = "") -> str:
    up_ms = (seq + 1) * 1000 if up is None else up
    return format_rm1(f"RM1,seq={seq},up={up_ms},win=1000,n={n},v={v},i=30000/29000/31000,"
                      f"vpsu=12040/12030/12050{extra}")


IDENTITY = format_rm1("RMI,proto=1,fw=rmfw-0.3,id=E6614103E7452D2F,sensor=ina226,win=1000,ch=v;i;vpsu")


def events(records: list[object], kind: str) -> list[EventDraft]:
    return [r for r in records if isinstance(r, EventDraft) and r.kind == kind]


class FakeTtyWatch:
    """Stands for udev: the test announces a tty add."""

    def __init__(self) -> None:
        self.on_added: TtyAddedFn | None = None

    def start(self, on_added: TtyAddedFn) -> bool:
        self.on_added = on_added
        return True

    def stop(self) -> None:
        self.on_added = None


def make_collector(root: Path, watch: FakeTtyWatch | None = None, **settings: object) -> PsuCollector:
    config = PsuSection(port=LINK, **{"reopen_min_s": 0.05, "reopen_max_s": 0.2, **settings})  # type: ignore[arg-type]
    return PsuCollector(config, HostRoot(root), SystemClock(), tty_watch=watch)
