"""Disks collector: diskstats of every kernel width, rates, resets and wraps."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.collectors.disks import SECTOR_BYTES, DiskCollector, DiskRateTracker, parse_diskstats
from rigmon.hw.root import HostRoot
from rigmon.sim import write_tree

LINE_20 = (" 259       0 nvme0n1 8813391 1204 2255424316 1838223 3041190 61 1549417144 2213877 0 2403936 4136570"
           " 1021 0 1310729216 611 120 1859\n")
LINE_18 = "   8       0 sda 9172 1234 1034642 5523 2071 1876 123464 9381 0 11720 14904 12 0 4096 3\n"
LINE_14 = "   8      16 sdb 9172 1234 1034642 5523 2071 1876 123464 9381 0 11720 14904\n"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return 1_700_000_000.0 + self.now

    def monotonic(self) -> float:
        return self.now


def test_twenty_columns_carry_discard_and_flush_counters() -> None:
    (d,) = parse_diskstats(LINE_20).disks
    assert (d.name, d.major, d.minor) == ("nvme0n1", 259, 0)
    assert d.read_sectors == 2255424316 and d.write_ms == 2213877 and d.io_ms == 2403936
    assert (d.discards, d.discard_sectors, d.discard_ms, d.flushes, d.flush_ms) == (1021, 1310729216, 611, 120, 1859)


def test_eighteen_columns_have_discards_but_no_flushes() -> None:
    (d,) = parse_diskstats(LINE_18).disks
    assert (d.discards, d.discard_sectors, d.discard_ms) == (12, 4096, 3)
    assert d.flushes is None and d.flush_ms is None


def test_fourteen_columns_have_neither() -> None:
    (d,) = parse_diskstats(LINE_14).disks
    assert d.weighted_ms == 14904
    assert d.discards is None and d.flushes is None


@pytest.mark.parametrize("line", ["   8  0 sda 1 2 3\n", "   8 0 sda 1 2 3 4 5 6 7 8 9 10 x\n",
                                  "   8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12\n", "sda\n"])
def test_a_malformed_line_is_skipped_and_the_others_read(line: str) -> None:
    parsed = parse_diskstats(LINE_20 + line + LINE_14)
    assert [d.name for d in parsed.disks] == ["nvme0n1", "sdb"]
    assert parsed.skipped == (line.strip(),)


def test_old_kernel_partition_lines_are_named_not_errors() -> None:
    # Documentation/admin-guide/iostats.rst, "2.6+ diskstats" example
    parsed = parse_diskstats("   3    0   hda 446216 784926 9550688 4382310 424847 312726 5922052 19310380 0 3376340"
                             " 23705160\n   3    1   hda1 35486 38030 38030 38030\n")
    assert [d.name for d in parsed.disks] == ["hda"]
    assert (parsed.partial, parsed.skipped) == (("hda1",), ())


def _stats(reads: int, sectors: int, read_ms: int, io_ms: int) -> str:
    return f" 259 0 nvme0n1 {reads} 0 {sectors} {read_ms} 0 0 0 0 0 {io_ms} 0\n"


def test_rates_from_two_reads() -> None:
    tracker = DiskRateTracker()
    (a,) = parse_diskstats(_stats(1000, 2_000_000, 500, 1000)).disks
    (b,) = parse_diskstats(_stats(3000, 4_000_000, 1500, 1500)).disks
    assert tracker.update("d", a, 10.0).read_bytes_per_s is None
    r = tracker.update("d", b, 11.0)
    assert r.read_bytes_per_s == 2_000_000 * SECTOR_BYTES
    assert r.read_iops == 2000
    assert r.util_pct == 50.0
    assert r.read_await_ms == 0.5
    assert r.write_await_ms is None


def test_counters_going_backwards_give_no_rates() -> None:
    tracker = DiskRateTracker()
    (a,) = parse_diskstats(_stats(5000, 9_000_000, 500, 1000)).disks
    (b,) = parse_diskstats(_stats(10, 80, 1, 2)).disks
    tracker.update("d", a, 10.0)
    assert tracker.update("d", b, 11.0).read_bytes_per_s is None


def test_millisecond_fields_wrap_at_32_bits() -> None:
    tracker = DiskRateTracker()
    (a,) = parse_diskstats(_stats(1000, 8000, 100, 2**32 - 200)).disks
    (b,) = parse_diskstats(_stats(1100, 8800, 150, 300)).disks
    tracker.update("d", a, 0.0)
    assert tracker.update("d", b, 1.0).util_pct == 50.0


def test_collector_reports_whole_disks_only(tmp_path: Path) -> None:
    write_tree(tmp_path, {
        "/proc/diskstats": LINE_20 + " 259 1 nvme0n1p1 1 0 8 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
                           "   7       0 loop0 55 0 2210 11 0 0 0 0 0 20 11 0 0 0 0 0 0\n",
        "/sys/block/nvme0n1/size": "1\n",
        "/sys/block/loop0/size": "1\n",
    })
    clock = Clock()
    collector = DiskCollector(HostRoot(tmp_path), clock)
    (first,) = collector.collect()
    assert first.name == "nvme0n1" and first.read_bytes_per_s is None
    assert first.read_bytes_total == 2255424316 * SECTOR_BYTES
    clock.now = 2.0
    write_tree(tmp_path, {"/proc/diskstats": LINE_20.replace("2255424316", "2257424316")})
    (second,) = collector.collect()
    assert second.read_bytes_per_s == 1_000_000 * SECTOR_BYTES


def test_device_mapper_volumes_are_not_counted_again(tmp_path: Path) -> None:
    """LVM and LUKS: dm-0 on nvme0n1p3 repeats the disk's I/O (and a storage sum doubled it)."""
    write_tree(tmp_path, {
        "/proc/diskstats": LINE_20 + " 259 3 nvme0n1p3 8813000 0 2255420000 0 3041000 0 1549410000 0 0 0 0 0 0 0 0 0 0\n"
                           " 252       0 dm-0 8813000 0 2255420000 0 3041000 0 1549410000 0 0 0 0 0 0 0 0 0 0\n"
                           " 252       1 dm-1 8813000 0 2255420000 0 3041000 0 1549410000 0 0 0 0 0 0 0 0 0 0\n",
        "/sys/block/nvme0n1/size": "1\n",
        "/sys/block/dm-0/size": "1\n",
        "/sys/block/dm-1/size": "1\n",
    })
    assert [d.name for d in DiskCollector(HostRoot(tmp_path), Clock()).collect()] == ["nvme0n1"]
