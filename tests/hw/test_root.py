"""HostRoot: reads below a root, never blocking, absent files as None."""

from __future__ import annotations

import errno
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from rigmon.hw.root import HostRoot, read_scope, rereadable_devices
from rigmon.sim import write_tree
from tests.hw.refusals import refuse_reads

T = TypeVar("T")


def test_reads_below_root(tmp_path: Path) -> None:
    write_tree(tmp_path, {"/sys/class/net/eth0/speed": "10000\n", "/proc/loadavg": "1 2 3 4/5 6\n"})
    root = HostRoot(tmp_path)
    assert root.read_attr("/sys/class/net/eth0/speed") == "10000"
    assert root.read_text("/proc/loadavg") == "1 2 3 4/5 6\n"
    assert root.listdir("/sys/class/net") == ["eth0"]


def test_absent_is_none_not_error(tmp_path: Path) -> None:
    root = HostRoot(tmp_path)
    assert root.read_attr("/sys/class/net/eth9/speed") is None
    assert root.read_attr("/proc/loadavg/not-a-dir") is None
    assert root.listdir("/sys/class/thunderbolt") == []
    assert root.readlink("/sys/block/md0/device") is None


def test_a_file_that_would_block_does_not_block(tmp_path: Path) -> None:
    # A FIFO with no writer blocks a plain open()+read(); some driver attributes behave alike.
    fifo = tmp_path / "sys" / "class" / "hwmon" / "hwmon0" / "in0_input"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    assert HostRoot(tmp_path).read_attr("/sys/class/hwmon/hwmon0/in0_input") in (None, "")


def test_reads_are_bounded(tmp_path: Path) -> None:
    write_tree(tmp_path, {"/proc/big": "x" * 10000})
    assert len(HostRoot(tmp_path).read_text("/proc/big", max_bytes=100) or "") == 100


def test_root_outside_is_not_consulted(tmp_path: Path) -> None:
    # The real /proc/stat exists on this machine; a tree without it must not fall back to it.
    assert HostRoot(tmp_path).read_text("/proc/stat") is None


def test_rereadable_devices_are_the_sysfs_and_procfs_mounts() -> None:
    mountinfo = ("22 27 0:21 / /proc rw,relatime shared:12 - proc proc rw\n"
                 "23 27 0:22 / /sys rw,relatime shared:7 - sysfs sysfs rw\n"
                 "27 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
                 "31 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
                 "garbage line\n")
    assert rereadable_devices(mountinfo) == {os.makedev(0, 21), os.makedev(0, 22)}


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"])
    # Until the child has become `sleep`, its /proc/PID/cmdline can read empty (seen once in CI on a
    # loaded machine): the tests read it as a process's file that has content.
    deadline = time.monotonic() + 10
    while not Path(f"/proc/{proc.pid}/cmdline").read_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _proc_is_procfs() -> bool:
    return os.stat("/proc/self").st_dev in rereadable_devices(Path("/proc/self/mountinfo").read_text())


def _held_files() -> list[str]:
    """What this process's descriptors point at (the listing's own descriptor is gone by then)."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            held.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return held


def in_tick(read: Callable[..., T], rel: str) -> T:
    """``read(rel)`` in a read scope of its own, as a sampler tick reads: only such reads keep descriptors."""
    with read_scope():
        return read(rel)


@pytest.mark.skipif(not Path("/proc/self/mountinfo").exists() or not _proc_is_procfs(), reason="no procfs")
def test_kernel_files_are_kept_open_read_afresh_and_absent_once_gone(sleeper: subprocess.Popen[bytes]) -> None:
    # The machine's own /proc, read-only: a child process's stat file, the way gpu_processes reads it.
    root = HostRoot("/")
    rel = f"/proc/{sleeper.pid}/stat"
    first = in_tick(root.read_text, rel)
    # Alive: sleeping, running, or (just exec'd on a busy machine) in uninterruptible wait.
    assert first is not None and first.split()[2] not in ("Z", "X"), first
    assert root.kept_fds() == 1
    sleeper.kill()
    deadline = time.monotonic() + 10
    while (in_tick(root.read_text, rel) or "").split()[2:3] != ["Z"]:
        # Read again through the kept descriptor: the kernel writes the file afresh (now a zombie).
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert root.kept_fds() == 1
    sleeper.wait()
    # Reaped: the kept descriptor answers ESRCH and the path is gone: absent, not the last text.
    assert in_tick(root.read_text, rel) is None
    assert root.kept_fds() == 0


def test_kept_descriptors_are_per_thread_and_bounded(sleeper: subprocess.Popen[bytes]) -> None:
    if not _proc_is_procfs():
        pytest.skip("no procfs")
    root = HostRoot("/")
    root._max_kept = 2
    for name in ("stat", "status", "cmdline"):
        assert in_tick(root.read_bytes, f"/proc/{sleeper.pid}/{name}")
    assert root.kept_fds() == 2
    other: list[int] = []

    def read_elsewhere() -> None:
        in_tick(root.read_text, f"/proc/{sleeper.pid}/stat")
        other.append(root.kept_fds())

    thread = threading.Thread(target=read_elsewhere)
    thread.start()
    thread.join()
    assert other == [1] and root.kept_fds() == 2
    assert HostRoot("/", keep_fds=False).read_text(f"/proc/{sleeper.pid}/stat") is not None


def test_reads_outside_a_tick_keep_no_descriptor(tmp_path: Path) -> None:
    # The kernel log's thread reads a GPU's PCI files when a line names it, now and then: a kept
    # descriptor there would hold the old files of a GPU that fell off the bus and came back.
    rel = "/sys/bus/pci/devices/0000:1d:00.0/vendor"
    tree = write_tree(tmp_path, {rel: "0x10de\n"})
    root = HostRoot(tmp_path)
    assert root.read_attr(rel) == "0x10de"
    assert root.kept_fds() == 0
    tree.remove("/sys/bus/pci/devices/0000:1d:00.0")
    tree.write(rel, "0x10de\n")
    assert not [t for t in _held_files() if t.startswith(str(tmp_path))]
    # A tick's read keeps it, and the same thread's later reads go through it.
    assert in_tick(root.read_attr, rel) == "0x10de" and root.kept_fds() == 1
    assert root.read_attr(rel) == "0x10de" and root.kept_fds() == 1


def test_files_of_a_tree_are_kept_and_a_replaced_file_is_read_new(tmp_path: Path) -> None:
    # Fixture and simulator trees replace files by rename: the kept descriptor of the old file
    # is seen to have lost its name, and the file is read again by its path.
    tree = write_tree(tmp_path, {"/sys/class/net/eth0/speed": "10000\n", "/proc/loadavg": "1 2 3 4/5 6\n"})
    root = HostRoot(tmp_path)
    assert in_tick(root.read_attr, "/sys/class/net/eth0/speed") == "10000"
    assert in_tick(root.read_text, "/proc/loadavg") == "1 2 3 4/5 6\n"
    assert root.kept_fds() == 2
    # Written in place (a test's write_text): the same file, read afresh from its start.
    (tmp_path / "proc/loadavg").write_text("7 8 9 1/2 3\n")
    assert in_tick(root.read_text, "/proc/loadavg") == "7 8 9 1/2 3\n"
    assert root.kept_fds() == 2
    tree.write("/sys/class/net/eth0/speed", "40000\n")
    assert in_tick(root.read_attr, "/sys/class/net/eth0/speed") == "40000"
    # A file that was replaced is opened for every read from then on (not kept).
    assert root.kept_fds() == 1
    tree.write("/sys/class/net/eth0/speed", "1000\n")  # shorter
    assert in_tick(root.read_attr, "/sys/class/net/eth0/speed") == "1000"
    assert root.kept_fds() == 1
    # Outside /sys and /proc nothing is kept.
    tree.write("/etc/hostname", "n1\n")
    assert in_tick(root.read_attr, "/etc/hostname") == "n1"
    assert root.kept_fds() == 1
    assert HostRoot(tmp_path, keep_fds=False).read_attr("/sys/class/net/eth0/speed") == "1000"


def test_a_vanished_tree_file_is_absent_and_a_new_one_is_read(tmp_path: Path) -> None:
    tree = write_tree(tmp_path, {"/sys/class/nvme/nvme0/state": "live\n", "/sys/class/nvme/nvme1/state": "live\n"})
    root = HostRoot(tmp_path)
    assert in_tick(root.read_attr, "/sys/class/nvme/nvme0/state") == "live"
    assert in_tick(root.read_attr, "/sys/class/nvme/nvme1/state") == "live"
    assert root.kept_fds() == 2
    tree.remove("/sys/class/nvme/nvme0")  # the device dropped off: its whole directory goes
    (tmp_path / "sys/class/nvme/nvme1/state").unlink()  # one file removed behind the tree's back
    assert in_tick(root.read_attr, "/sys/class/nvme/nvme0/state") is None
    assert in_tick(root.read_attr, "/sys/class/nvme/nvme1/state") is None
    assert root.kept_fds() == 0
    tree.write("/sys/class/nvme/nvme0/state", "resetting\n")  # back again
    assert in_tick(root.read_attr, "/sys/class/nvme/nvme0/state") == "resetting"


def test_fifos_and_other_filesystems_in_a_tree_are_not_kept(tmp_path: Path) -> None:
    write_tree(tmp_path, {"/sys/class/hwmon/hwmon0/name": "x\n"})
    fifo = tmp_path / "sys/class/hwmon/hwmon0/temp1_input"
    os.mkfifo(fifo)
    root = HostRoot(tmp_path)
    assert not in_tick(root.read_attr, "/sys/class/hwmon/hwmon0/temp1_input")  # no writer: nothing, at once
    assert in_tick(root.read_attr, "/sys/class/hwmon/hwmon0/name") == "x"
    assert root.kept_fds() == 1


def test_a_tree_rewritten_while_read_is_never_torn_nor_stale(tmp_path: Path) -> None:
    """A writer replaces one file as the simulator does (lengths changing and not) while a reader
    on another thread reads it through a kept descriptor: every read is one whole version, and
    never one older than the newest the writer had finished before the read began."""
    tree = write_tree(tmp_path, {"/proc/diskstats": "0 0 0\n"})
    finished = [0]
    reading = threading.Event()
    done = threading.Event()

    def write() -> None:
        i = 0
        while not done.is_set() or i < 100:
            i += 1
            # Versions whose length changes now and then: "7 7 7", "10 10 10", ...
            tree.write("/proc/diskstats", f"{i} {i} {i}\n")
            finished[0] = i
            if i == 10:
                reading.set()

    def check(text: str | None, floor: int) -> int:
        assert text is not None and text.endswith("\n"), text
        parts = text.split()
        assert len(parts) == 3 and len(set(parts)) == 1, text  # whole, not torn
        assert int(parts[0]) >= floor, (text, floor)  # not stale
        return int(parts[0])

    writer = threading.Thread(target=write)
    seen = []
    kept_reads = 0
    writer.start()
    try:
        reading.wait(10)
        for _ in range(300):
            # A new root per round: its first read opens and keeps the file, its second goes
            # through the kept descriptor (a replaced file is not kept again by the same root).
            root = HostRoot(tmp_path)
            first = check(in_tick(root.read_text, "/proc/diskstats"), 0)
            kept_reads += root.kept_fds()
            # A newer version is out before the second read: the kept file is an old one.
            deadline = time.monotonic() + 10
            while finished[0] <= first:
                assert time.monotonic() < deadline
                time.sleep(0)
            floor = finished[0]
            seen.append(check(in_tick(root.read_text, "/proc/diskstats"), floor))
    finally:
        done.set()
        writer.join()
    last = finished[0]
    root = HostRoot(tmp_path)
    assert in_tick(root.read_text, "/proc/diskstats") == f"{last} {last} {last}\n"
    assert in_tick(root.read_text, "/proc/diskstats") == f"{last} {last} {last}\n"
    assert root.kept_fds() == 1
    # (A first read whose file was replaced between its open and its fstat is not kept.)
    assert kept_reads > 100 and len(set(seen)) > 1  # the kept reads did overlap the writes


def test_read_parsed_reuses_the_parse_of_the_same_bytes_only(tmp_path: Path) -> None:
    tree = write_tree(tmp_path, {"/proc/mdstat": "one\n"})
    root = HostRoot(tmp_path)
    calls: list[str] = []

    def parse(text: str) -> list[str]:
        calls.append(text)
        return text.split()

    first = root.read_parsed("/proc/mdstat", parse)
    assert first == ["one"]
    assert root.read_parsed("/proc/mdstat", parse) is first
    assert calls == ["one\n"]
    # Another parser of the same file parses for itself.
    assert root.read_parsed("/proc/mdstat", str.upper) == "ONE\n"
    # New bytes (same length) are parsed again: the file is read every time.
    tree.write("/proc/mdstat", "two\n")
    assert root.read_parsed("/proc/mdstat", parse) == ["two"]
    assert calls == ["one\n", "two\n"]
    # A vanished file is absent at once, whatever was parsed before; back, it is read afresh.
    tree.remove("/proc/mdstat")
    assert root.read_parsed("/proc/mdstat", parse) is None
    tree.write("/proc/mdstat", "two\n")
    assert root.read_parsed("/proc/mdstat", parse) == ["two"]


def test_read_parsed_remembers_no_failed_parse(tmp_path: Path) -> None:
    write_tree(tmp_path, {"/proc/diskstats": "garbled\n"})
    root = HostRoot(tmp_path)
    calls = 0

    def parse(text: str) -> str:
        nonlocal calls
        calls += 1
        raise ValueError(text)

    for _ in range(2):
        with pytest.raises(ValueError):
            root.read_parsed("/proc/diskstats", parse)
    assert calls == 2


def test_a_read_scope_reads_each_file_and_directory_once(tmp_path: Path) -> None:
    tree = write_tree(tmp_path, {"/sys/class/hwmon/hwmon0/temp1_input": "40000\n", "/proc/diskstats": "a\n"})
    root = HostRoot(tmp_path)
    other = HostRoot(tmp_path)  # another collector's root, same machine
    with read_scope():
        assert root.listdir("/sys/class/hwmon") == ["hwmon0"]
        assert root.read_attr("/sys/class/hwmon/hwmon0/temp1_input") == "40000"
        assert root.read_text("/proc/diskstats") == "a\n"
        assert root.read_attr("/sys/class/hwmon/hwmon9/temp1_input") is None
        tree.write("/sys/class/hwmon/hwmon0/temp1_input", "41000\n")
        tree.write("/proc/diskstats", "b\n")
        tree.write("/sys/class/hwmon/hwmon1/temp1_input", "42000\n")
        tree.write("/sys/class/hwmon/hwmon9/temp1_input", "43000\n")
        with read_scope():  # a scope within a scope is part of it
            listing = other.listdir("/sys/class/hwmon")
        assert listing == ["hwmon0"]
        listing.append("mine")  # a caller's list is its own
        assert root.listdir("/sys/class/hwmon") == ["hwmon0"]
        assert other.read_attr("/sys/class/hwmon/hwmon0/temp1_input") == "40000"
        assert other.read_parsed("/proc/diskstats", str.upper) == "A\n"
        assert other.read_attr("/sys/class/hwmon/hwmon9/temp1_input") is None
        # Another thread (the PSU reader, a udev re-read) reads afresh.
        seen: list[object] = []
        thread = threading.Thread(target=lambda: seen.extend([
            root.listdir("/sys/class/hwmon"), root.read_attr("/sys/class/hwmon/hwmon0/temp1_input")]))
        thread.start()
        thread.join()
        assert seen == [["hwmon0", "hwmon1", "hwmon9"], "41000"]
        # A read with other limits is its own read.
        assert root.read_text("/proc/diskstats", max_bytes=1) == "b"
    # After the scope, everything is read afresh: a vanished file is absent at once.
    assert root.listdir("/sys/class/hwmon") == ["hwmon0", "hwmon1", "hwmon9"]
    assert root.read_text("/proc/diskstats") == "b\n"
    tree.remove("/sys/class/hwmon/hwmon0")
    with read_scope():
        assert root.read_attr("/sys/class/hwmon/hwmon0/temp1_input") is None
        assert root.listdir("/sys/class/hwmon") == ["hwmon1", "hwmon9"]


def test_a_listing_with_inode_numbers_tells_a_directory_made_again(tmp_path: Path) -> None:
    tree = write_tree(tmp_path, {"/sys/class/hwmon/hwmon3/name": "pmbus\n", "/sys/class/hwmon/hwmon1/name": "nct6779\n"})
    root = HostRoot(tmp_path)
    before = root.listdir_inodes("/sys/class/hwmon")
    assert [name for name, _ in before] == root.listdir("/sys/class/hwmon") == ["hwmon1", "hwmon3"]
    assert before[1][1] == os.stat(tmp_path / "sys/class/hwmon/hwmon3").st_ino
    tree.renew_dir("/sys/class/hwmon/hwmon3")  # the device registered again under its name
    with read_scope():
        after = root.listdir_inodes("/sys/class/hwmon")
        assert after[0] == before[0] and after[1][0] == "hwmon3" and after[1][1] != before[1][1]
        tree.remove("/sys/class/hwmon/hwmon1")
        assert root.listdir_inodes("/sys/class/hwmon") == after  # once per read scope
    assert [name for name, _ in root.listdir_inodes("/sys/class/hwmon")] == ["hwmon3"]
    assert root.listdir_inodes("/sys/class/absent") == root.listdir_inodes("/sys/class/hwmon/hwmon3/name") == []


@pytest.mark.parametrize("code", [errno.EREMOTEIO, errno.EPERM, errno.ETIMEDOUT, errno.EBUSY])
def test_an_attribute_its_driver_refuses_for_now_is_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           code: int) -> None:
    """A PMBus PSU that NAKs its I2C read (EREMOTEIO), amdgpu suspended (EPERM), a NIC's firmware
    (ETIMEDOUT, EBUSY): that attribute reads as not there, the next one reads, nothing raises."""
    write_tree(tmp_path, {"/sys/class/hwmon/hwmon3/curr2_input": "41000\n", "/sys/class/hwmon/hwmon3/in1_input": "12000\n"})
    root = HostRoot(tmp_path)
    refuse_reads(monkeypatch, lambda path: code if path.endswith("curr2_input") else None)
    assert root.read_attr("/sys/class/hwmon/hwmon3/curr2_input") is None
    assert root.read_attr("/sys/class/hwmon/hwmon3/in1_input") == "12000"
