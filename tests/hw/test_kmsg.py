"""KmsgReader on a character device: one record per read, EAGAIN at the end, EPIPE on overrun.

The ring buffer is scripted behind a real character device (``/dev/null`` linked in as the
root's ``/dev/kmsg``) so the reader takes its device path; `test_real_dev_kmsg_overrun`
overruns the machine's own kernel log and runs only when asked to (it floods that log).
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from rigmon.collectors.base import CollectorError, EventDraft
from rigmon.collectors.kernel_log import KernelLogCollector
from rigmon.hw.kmsg import KmsgReader
from rigmon.hw.root import HostRoot
from rigmon.schema import KernelLogReading


class RingBuffer:
    """What /dev/kmsg's read() does, record by record: bytes, or an errno to raise."""

    def __init__(self, script: list[bytes | int]) -> None:
        self.script = script

    def read(self, fd: int, size: int) -> bytes:
        assert size >= 1024  # smaller buffers get EINVAL from the kernel
        if not self.script:
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        item = self.script.pop(0)
        if isinstance(item, int):
            raise OSError(item, os.strerror(item))
        return item


def record(seq: int, message: str, level: int = 6) -> bytes:
    return f"{level},{seq},{seq * 1000},-;{message}\n".encode()


@pytest.fixture
def device_root(tmp_path: Path) -> HostRoot:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "kmsg").symlink_to("/dev/null")
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "uptime").write_text("100.00 50.00\n")
    return HostRoot(tmp_path)


def test_device_reads_one_record_per_read_until_eagain(device_root: HostRoot) -> None:
    ring = RingBuffer([record(1, "a"), record(2, "b")])
    reader = KmsgReader(device_root, read=ring.read)
    reader.open(from_end=False)
    try:
        assert reader.read_records() == [record(1, "a"), record(2, "b")]
        assert reader.read_records() == []
    finally:
        reader.close()
    assert reader.overruns == 0


def test_device_overrun_is_counted_and_reading_goes_on(device_root: HostRoot) -> None:
    ring = RingBuffer([record(1, "a"), errno.EPIPE, record(40, "after the overrun")])
    reader = KmsgReader(device_root, read=ring.read)
    reader.open(from_end=False)
    try:
        assert reader.read_records() == [record(1, "a"), record(40, "after the overrun")]
    finally:
        reader.close()
    assert reader.overruns == 1


def test_device_error_other_than_overrun_is_raised(device_root: HostRoot) -> None:
    reader = KmsgReader(device_root, read=RingBuffer([errno.EIO]).read)
    reader.open(from_end=False)
    try:
        with pytest.raises(OSError) as info:
            reader.read_records()
    finally:
        reader.close()
    assert info.value.errno == errno.EIO


class Clock:
    def time(self) -> float:
        return 1_700_000_000.0

    def monotonic(self) -> float:
        return 0.0


def test_collector_reports_an_overrun_once_with_the_records_lost(device_root: HostRoot) -> None:
    collector = KernelLogCollector(device_root, Clock())
    ring = RingBuffer([record(1, "boot")])
    collector._reader = KmsgReader(device_root, read=ring.read)
    try:
        collector.collect()
        ring.script += [errno.EPIPE, record(31, "NVRM: Xid (PCI:0000:1a:00): 79, GPU has fallen off the bus.", 4)]
        out = collector.collect()
        ring.script += [record(32, "quiet")]
        later = collector.collect()
    finally:
        collector.close()
    events = [r for r in out if isinstance(r, EventDraft)]
    assert [(e.kind, (e.data or {}).get("lost")) for e in events] == [
        ("kernel_log_overrun", 29), ("xid", None)]
    reading = next(r for r in later if isinstance(r, KernelLogReading))
    assert reading.lost_total == 29
    assert not [r for r in later if isinstance(r, EventDraft)]


XID_79 = "NVRM: Xid (PCI:0000:1a:00): 79, GPU has fallen off the bus."


def test_a_failed_read_is_the_collectors_error_until_a_read_succeeds(device_root: HostRoot) -> None:
    collector = KernelLogCollector(device_root, Clock())
    ring = RingBuffer([record(1, "boot")])
    collector._reader = KmsgReader(device_root, read=ring.read)
    try:
        collector.collect()
        ring.script += [errno.EIO]
        with pytest.raises(CollectorError, match="/dev/kmsg: read failed: .*Input/output error"):
            collector.collect()
        ring.script += [record(2, XID_79, 4)]
        out = collector.collect()
    finally:
        collector.close()
    assert [e.kind for e in out if isinstance(e, EventDraft)] == ["xid"]


def test_the_pushing_thread_outlives_a_failed_read(device_root: HostRoot) -> None:
    """A read error must not end the thread: the Xid 79 logged after it is still pushed."""
    collector = KernelLogCollector(device_root, Clock())
    ring = RingBuffer([record(1, "boot")])
    collector._reader = KmsgReader(device_root, read=ring.read)
    pushed: list[object] = []
    arrived = threading.Event()

    def push(records: Sequence[object]) -> None:
        pushed.extend(records)
        arrived.set()

    collector.start(push)
    try:
        ring.script += [errno.EIO]
        for _ in range(1000):
            try:
                collector.collect()
            except CollectorError as exc:
                assert "read failed" in str(exc)
                break
            time.sleep(0.01)
        else:
            raise AssertionError("the failed read was never reported")
        ring.script += [record(2, XID_79, 4)]
        assert arrived.wait(10)
        assert [r for r in collector.collect() if isinstance(r, KernelLogReading)]
    finally:
        collector.close()
    assert [e.kind for e in pushed if isinstance(e, EventDraft)] == ["xid"]


# --- the real kernel log ----------------------------------------------------------------------

DEVKMSG_SYSCTL = Path("/proc/sys/kernel/printk_devkmsg")


@pytest.fixture
def unlimited_devkmsg() -> Iterator[None]:
    """Lift the kernel's rate limit on /dev/kmsg writes for the test, then put it back."""
    before = DEVKMSG_SYSCTL.read_text().strip()
    DEVKMSG_SYSCTL.write_text("on\n")
    try:
        yield
    finally:
        DEVKMSG_SYSCTL.write_text(before + "\n")


@pytest.mark.skipif(os.environ.get("RIGMON_TEST_REAL_KMSG") != "1",
                    reason="floods this machine's kernel log; set RIGMON_TEST_REAL_KMSG=1 (CI does)")
def test_real_dev_kmsg_overrun(unlimited_devkmsg: None) -> None:
    """Overrun the machine's own ring buffer: EPIPE, lost records counted, reading goes on."""
    if os.geteuid() != 0 or not os.access("/dev/kmsg", os.R_OK | os.W_OK):
        pytest.fail("RIGMON_TEST_REAL_KMSG=1 needs root (to write /dev/kmsg and lift its rate limit)")
    collector = KernelLogCollector(HostRoot("/"), Clock())
    try:
        collector.collect()  # what the log holds now is history
        marker = f"rigmon-test-{os.getpid()}"
        fd = os.open("/dev/kmsg", os.O_WRONLY)
        try:
            # Far more than a ring buffer of the usual sizes (128 KiB to 2 MiB) holds.
            filler = b"x" * 900
            for i in range(5000):
                os.write(fd, b"<7>%s filler %d %s" % (marker.encode(), i, filler))
            os.write(fd, b"<4>%s last record\n" % marker.encode())
        finally:
            os.close(fd)
        out = collector.collect()
    finally:
        collector.close()
    assert collector._reader.overruns >= 1
    events = [r for r in out if isinstance(r, EventDraft) and r.kind == "kernel_log_overrun"]
    assert len(events) == 1 and events[0].data is not None and int(events[0].data["lost"] or 0) > 0
    reading = next(r for r in out if isinstance(r, KernelLogReading))
    assert reading.lost_total >= int(events[0].data["lost"] or 0)
    # Reading went on after the overrun up to the newest record.
    assert collector._last_seq is not None
