"""HostRoot: reads below a root, never blocking, absent files as None."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rigmon.hw.root import HostRoot, rereadable_devices
from rigmon.sim import write_tree


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
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _proc_is_procfs() -> bool:
    return os.stat("/proc/self").st_dev in rereadable_devices(Path("/proc/self/mountinfo").read_text())


@pytest.mark.skipif(not Path("/proc/self/mountinfo").exists() or not _proc_is_procfs(), reason="no procfs")
def test_kernel_files_are_kept_open_read_afresh_and_absent_once_gone(sleeper: subprocess.Popen[bytes]) -> None:
    # The machine's own /proc, read-only: a child process's stat file, the way gpu_processes reads it.
    root = HostRoot("/")
    rel = f"/proc/{sleeper.pid}/stat"
    first = root.read_text(rel)
    # Alive: sleeping, running, or (just exec'd on a busy machine) in uninterruptible wait.
    assert first is not None and first.split()[2] not in ("Z", "X"), first
    assert root.kept_fds() == 1
    sleeper.kill()
    deadline = time.monotonic() + 10
    while (root.read_text(rel) or "").split()[2:3] != ["Z"]:
        # Read again through the kept descriptor: the kernel writes the file afresh (now a zombie).
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert root.kept_fds() == 1
    sleeper.wait()
    # Reaped: the kept descriptor answers ESRCH and the path is gone: absent, not the last text.
    assert root.read_text(rel) is None
    assert root.kept_fds() == 0


def test_kept_descriptors_are_per_thread_and_bounded(sleeper: subprocess.Popen[bytes]) -> None:
    if not _proc_is_procfs():
        pytest.skip("no procfs")
    root = HostRoot("/")
    root._max_kept = 2
    for name in ("stat", "status", "cmdline"):
        assert root.read_bytes(f"/proc/{sleeper.pid}/{name}")
    assert root.kept_fds() == 2
    other: list[int] = []

    def read_elsewhere() -> None:
        root.read_text(f"/proc/{sleeper.pid}/stat")
        other.append(root.kept_fds())

    thread = threading.Thread(target=read_elsewhere)
    thread.start()
    thread.join()
    assert other == [1] and root.kept_fds() == 2
    assert HostRoot("/", keep_fds=False).read_text(f"/proc/{sleeper.pid}/stat") is not None


def test_files_of_a_tree_are_not_kept_and_a_replaced_file_is_read_new(tmp_path: Path) -> None:
    # Fixture and simulator trees replace files by rename: a kept descriptor would read the old one.
    tree = write_tree(tmp_path, {"/sys/class/net/eth0/speed": "10000\n"})
    root = HostRoot(tmp_path)
    assert root.read_attr("/sys/class/net/eth0/speed") == "10000"
    tree.write("/sys/class/net/eth0/speed", "40000\n")
    assert root.read_attr("/sys/class/net/eth0/speed") == "40000"
    assert root.kept_fds() == 0
