"""HostRoot: reads below a root, never blocking, absent files as None."""

from __future__ import annotations

import os
from pathlib import Path

from rigmon.hw.root import HostRoot
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
