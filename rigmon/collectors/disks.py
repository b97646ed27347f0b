"""Disks collector: per block device throughput, IOPS, utilisation and wait from /proc/diskstats."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

import msgspec

from rigmon.clock import Clock
from rigmon.collectors.base import CollectorContext, CollectorError, EventDraft, NoData, PolledCollector
from rigmon.collectors.sysfs_values import U64_DIGITS, U64_MAX
from rigmon.hw.names import TextNames, text_name
from rigmon.hw.root import HostRoot
from rigmon.rates import CounterRates, counter_delta
from rigmon.schema import DiskReading

#: diskstats counts sectors in 512-byte units whatever the device's logical block size.
SECTOR_BYTES = 512
#: Millisecond fields of diskstats are `unsigned int` in the kernel and wrap at 2^32.
MS_COUNTER_BITS = 32
#: Counters after the name: 11 before 4.18, 15 with discard fields, 17 with flush fields (5.5+).
_COUNTER_WIDTHS = (11, 15, 17)
#: Devices that are never rig storage; ``dm-`` (LVM, LUKS, dm-crypt) sits on a disk already reported,
#: whose I/O it repeats: an Ubuntu server's root LV doubled the node's storage throughput.
_SKIPPED_PREFIXES = ("loop", "ram", "zram", "fd", "sr", "dm-")


class DiskStats(msgspec.Struct, frozen=True, gc=False):
    """One device's cumulative counters (diskstats fields 1-17; later ones ``None`` when absent)."""

    name: str
    major: int
    minor: int
    reads: int
    reads_merged: int
    read_sectors: int
    read_ms: int
    writes: int
    writes_merged: int
    write_sectors: int
    write_ms: int
    in_flight: int
    io_ms: int
    weighted_ms: int
    discards: int | None = None
    discard_sectors: int | None = None
    discard_ms: int | None = None
    flushes: int | None = None
    flush_ms: int | None = None


def _stats_from_counters(name: str, major: int, minor: int, values: Sequence[int]) -> DiskStats:
    if len(values) not in _COUNTER_WIDTHS:
        raise ValueError(f"{name}: expected 11, 15 or 17 counters, got {len(values)}")
    # Fields 12-15 (discards, merged, sectors, ms) and 16-17 (flushes, ms) are absent on
    # older kernels: absent, not zero.
    opt: list[int | None] = [*values[11:], *([None] * (17 - len(values)))]
    v = values
    return DiskStats(
        name=name, major=major, minor=minor,
        reads=v[0], reads_merged=v[1], read_sectors=v[2], read_ms=v[3],
        writes=v[4], writes_merged=v[5], write_sectors=v[6], write_ms=v[7],
        in_flight=v[8], io_ms=v[9], weighted_ms=v[10],
        discards=opt[0], discard_sectors=opt[2], discard_ms=opt[3], flushes=opt[4], flush_ms=opt[5],
    )


class Diskstats(msgspec.Struct, frozen=True, gc=False):
    """What one read of /proc/diskstats holds.

    Attributes:
        disks: every well-formed device line.
        partial: partitions of 2.6.x kernels before 2.6.25, printed with 4 counters (reads,
            sectors read, writes, sectors written): named, not reported.
        skipped: lines that are not diskstats (wrong column count, non-numeric counters),
            each dropped on its own so the other devices still read.
    """

    disks: list[DiskStats]
    partial: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()


#: Columns of a partition line on kernels before 2.6.25: major, minor, name and 4 counters.
OLD_PARTITION_COLUMNS = 7


def parse_diskstats(text: str) -> Diskstats:
    """Parse /proc/diskstats (14, 18 or 20 columns per line, by kernel version).

    A line that is not diskstats is skipped and returned in ``skipped``, never the end of
    every other device's reading; the 7-column partition lines of old kernels are named in
    ``partial``.
    """
    disks: list[DiskStats] = []
    partial: list[str] = []
    skipped: list[str] = []
    for line in text.splitlines():
        #    8       0 sda 9172 1234 1034642 5523 2071 1876 123464 9381 0 11720 14904
        # (4.18+ appends 4 discard counters, 5.5+ 2 more flush counters)
        parts = line.split()
        if not parts:
            continue
        # Counters are unsigned: int() alone would take "-5", "+5" and "1_0". Every column but the
        # name is ASCII digits when all of them joined are (split() leaves no empty column).
        joined = "".join((parts[0], parts[1], *parts[3:])) if len(parts) >= 3 else ""
        numeric = joined.isascii() and joined.isdigit()
        if numeric and len(parts) == OLD_PARTITION_COLUMNS:
            #    3    1   hda1 35486 38030 38030 38030   (2.6.x before 2.6.25, Documentation/iostats)
            partial.append(parts[2])
            continue
        # The kernel prints each counter as an unsigned long (64 bits): a longer one is a garbled
        # line (int() fails past 4300 digits; a frame cannot carry more than 64 bits).
        if (not numeric or len(parts) - 3 not in _COUNTER_WIDTHS
                or len(max((parts[0], parts[1], *parts[3:]), key=len)) > U64_DIGITS):
            skipped.append(line.strip())
            continue
        numbers = [int(v) for v in parts[3:]]
        major, minor = int(parts[0]), int(parts[1])
        if max(numbers) > U64_MAX or max(major, minor) > U64_MAX:
            skipped.append(line.strip())
            continue
        disks.append(_stats_from_counters(parts[2], major, minor, numbers))
    return Diskstats(disks=disks, partial=tuple(partial), skipped=tuple(skipped))


class DiskRates(msgspec.Struct, frozen=True, gc=False):
    """Rates of one device over the last interval (``None`` on the first read or after a reset)."""

    read_bytes_per_s: float | None = None
    write_bytes_per_s: float | None = None
    read_iops: float | None = None
    write_iops: float | None = None
    util_pct: float | None = None
    read_await_ms: float | None = None
    write_await_ms: float | None = None


#: The rates of a first read, a reset or no interval: every one ``None`` (shared, it is frozen).
NO_RATES = DiskRates()


class DiskRateTracker:
    """Turns successive `DiskStats` of devices into `DiskRates`.

    A device whose counters go backwards (re-created after a re-plug, or a name re-used by
    another drive) yields ``None`` rates for that interval instead of a huge spike.
    """

    def __init__(self) -> None:
        self._last: dict[Hashable, tuple[float, DiskStats]] = {}
        self._rates = CounterRates()

    def update(self, key: Hashable, stats: DiskStats, now_s: float) -> DiskRates:
        """Record ``stats`` of device ``key`` at monotonic ``now_s`` and return its rates."""
        last = self._last.get(key)
        self._last[key] = (now_s, stats)
        if last is None:
            return NO_RATES
        then_s, prev = last
        elapsed_s = now_s - then_s
        if elapsed_s <= 0:
            return NO_RATES
        reads = counter_delta(prev.reads, stats.reads, None)
        writes = counter_delta(prev.writes, stats.writes, None)
        rd_sec = counter_delta(prev.read_sectors, stats.read_sectors, None)
        wr_sec = counter_delta(prev.write_sectors, stats.write_sectors, None)
        if reads is None or writes is None or rd_sec is None or wr_sec is None:
            return NO_RATES
        io_ms = counter_delta(prev.io_ms, stats.io_ms, MS_COUNTER_BITS)
        rd_ms = counter_delta(prev.read_ms, stats.read_ms, MS_COUNTER_BITS)
        wr_ms = counter_delta(prev.write_ms, stats.write_ms, MS_COUNTER_BITS)
        return DiskRates(
            read_bytes_per_s=rd_sec * SECTOR_BYTES / elapsed_s,
            write_bytes_per_s=wr_sec * SECTOR_BYTES / elapsed_s,
            read_iops=reads / elapsed_s,
            write_iops=writes / elapsed_s,
            util_pct=None if io_ms is None else round(min(100.0, io_ms / (elapsed_s * 1000.0) * 100.0), 2),
            read_await_ms=None if rd_ms is None or reads == 0 else rd_ms / reads,
            write_await_ms=None if wr_ms is None or writes == 0 else wr_ms / writes,
        )

    def forget_missing(self, present: Iterable[Hashable]) -> None:
        """Drop devices no longer seen, so a re-plugged device starts fresh."""
        keep = set(present)
        for key in list(self._last):
            if key not in keep:
                del self._last[key]


def is_reported_disk(name: str, whole_disks: set[str]) -> bool:
    """Whether a diskstats line is a whole device worth reporting.

    Args:
        name: the kernel name.
        whole_disks: entries of /sys/block (empty when unknown: then partitions are kept).
    """
    if name.startswith(_SKIPPED_PREFIXES):
        return False
    return not whole_disks or name in whole_disks


class DiskCollector(PolledCollector):
    """Block devices from /proc/diskstats: one `DiskReading` per whole disk and md array.

    Args:
        root: the machine's files.
        clock: monotonic time for rates.
    """

    name = "disks"

    def __init__(self, root: HostRoot, clock: Clock) -> None:
        self.root = root
        self.clock = clock
        self._tracker = DiskRateTracker()
        self._skipped_before: tuple[str, ...] = ()
        self.skipped_lines_total = 0
        #: Device names as records carry them, worked out once per name.
        self._names = TextNames()

    def collect(self) -> Sequence[object]:
        # The md collector parses the same file in the same tick: the parse of the same bytes is shared.
        # A device may be named in any bytes: read as /sys/block lists it, so that the two meet;
        # its record carries the name as `text_name` gives it (two such names stay two devices).
        parsed = self.root.read_parsed("/proc/diskstats", parse_diskstats, errors="surrogateescape")
        if parsed is None:
            raise NoData("no /proc/diskstats")
        now_s = self.clock.monotonic()
        whole = set(self.root.listdir("/sys/block"))
        out: list[object] = []
        readings = []
        keys = []
        for st in parsed.disks:
            if not is_reported_disk(st.name, whole):
                continue
            # Key by name and device number: a re-plugged enclosure may re-use a name
            # with another minor, and must not be diffed against the old device.
            key = (st.name, st.major, st.minor)
            keys.append(key)
            rates = self._tracker.update(key, st, now_s)
            readings.append(DiskReading(
                name=self._names(st.name),
                major=st.major,
                minor=st.minor,
                reads_total=st.reads,
                writes_total=st.writes,
                read_bytes_total=st.read_sectors * SECTOR_BYTES,
                write_bytes_total=st.write_sectors * SECTOR_BYTES,
                in_flight=st.in_flight,
                discards_total=st.discards,
                flushes_total=st.flushes,
                read_bytes_per_s=rates.read_bytes_per_s,
                write_bytes_per_s=rates.write_bytes_per_s,
                read_iops=rates.read_iops,
                write_iops=rates.write_iops,
                util_pct=rates.util_pct,
                read_await_ms=rates.read_await_ms,
                write_await_ms=rates.write_await_ms,
            ))
        self._tracker.forget_missing(keys)
        skipped = parsed.skipped
        self.skipped_lines_total += len(skipped)
        if not readings and skipped:
            raise CollectorError(f"/proc/diskstats: no line is diskstats, first: {skipped[0][:120]!r}")
        if not readings:
            raise NoData("no block devices")
        new = [line for line in skipped if line not in self._skipped_before]
        self._skipped_before = skipped
        if new:
            line = text_name(new[0])
            out.append(EventDraft(
                "diskstats_line_skipped", "warning", "disks",
                f"/proc/diskstats: skipped {len(skipped)} line{'s' if len(skipped) != 1 else ''} that "
                f"{'are' if len(skipped) != 1 else 'is'} not diskstats ({self.skipped_lines_total} so far): "
                f"{line[:120]!r}",
                {"skipped": len(skipped), "skipped_total": self.skipped_lines_total, "line": line[:200]},
            ))
        out.extend(readings)
        return out


def make_disk_collector(ctx: CollectorContext) -> DiskCollector:
    """Registry factory."""
    return DiskCollector(ctx.root, ctx.clock)
