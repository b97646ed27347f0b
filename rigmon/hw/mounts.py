"""Which mounts hold files the kernel generates afresh on every read (sysfs, procfs)."""

from __future__ import annotations

import os

#: Filesystems whose files the kernel generates again on every read at offset 0 (sysfs
#: attributes; procfs seq_files such as /proc/stat, /proc/diskstats, /proc/net/dev, /proc/PID/stat).
REREADABLE_FS = frozenset({"sysfs", "proc"})


def rereadable_devices(mountinfo: str) -> frozenset[int]:
    """Device numbers (``st_dev``) of the sysfs and procfs mounts in a ``/proc/self/mountinfo`` text."""
    devices = set()
    # 22 27 0:21 / /proc rw,relatime - proc proc rw
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields = head.split()
        if not sep or len(fields) < 3 or not tail.split() or tail.split()[0] not in REREADABLE_FS:
            continue
        major, _, minor = fields[2].partition(":")
        try:
            devices.add(os.makedev(int(major), int(minor)))
        except ValueError:
            continue
    return frozenset(devices)


def own_rereadable_devices() -> frozenset[int]:
    """`rereadable_devices` of this process's own mounts; empty when they cannot be read."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            return rereadable_devices(f.read())
    except OSError:
        return frozenset()
