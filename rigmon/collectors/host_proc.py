"""Pure parsers of the /proc files the host collector reads: /proc/stat, loadavg, meminfo, uptime
and net/dev. No I/O and no clock; the collector is `rigmon.collectors.host`."""

from __future__ import annotations

import math
import re
from collections.abc import Collection

import msgspec

from rigmon.collectors.sysfs_values import U64_DIGITS, U64_MAX
from rigmon.lazy_re import lazy_compile

KIB = 1024
MILLI = 1000.0


class CpuTimes(msgspec.Struct, frozen=True, gc=False):
    """Aggregate CPU time from /proc/stat in USER_HZ ticks."""

    busy: int
    total: int
    cpu_count: int


class NetCounters(msgspec.Struct, frozen=True, gc=False):
    """One interface's line of /proc/net/dev."""

    rx_bytes: int
    rx_packets: int
    rx_errors: int
    rx_dropped: int
    tx_bytes: int
    tx_packets: int
    tx_errors: int
    tx_dropped: int


#: The aggregate line of /proc/stat and the per-CPU lines right after it (the kernel's
#: ``show_stat``: ``cpu``, then one ``cpuN`` line per online CPU, then ``intr`` and the rest).
#: Possessive (``*+``): a line's characters are never given back, which could not make a match
#: (what follows them is a newline or the end), so the engine keeps no backtracking state for
#: each character: half the cost of the search on every tick.
_CPU_LINES = lazy_compile(r"^cpu (?P<fields>[^\n]*+)\n?(?P<cpus>(?:cpu\d[^\n]*+(?:\n|\Z))*+)", re.MULTILINE)


def parse_proc_stat(text: str) -> CpuTimes:
    """Parse the aggregate ``cpu`` line of /proc/stat, and count the CPUs online.

    ``cpu_count`` is the number of ``cpuN`` lines that follow the aggregate line: the kernel
    writes one per online CPU (with cpu1 offline, cpu0, cpu2, cpu3: 3). The lines after them
    (``intr``, one count per interrupt number, is most of the file on a large machine) are not
    looked at.

    Raises:
        ValueError: no aggregate cpu line, or a malformed one.
    """
    # cpu  10132153 290696 3084719 46828483 16683 0 25195 0 175628 0
    # (user nice system idle iowait irq softirq steal guest guest_nice)
    # cpu0 5066076 145348 1542359 23414241 8341 0 12597 0 87814 0
    match = _CPU_LINES.search(text)
    if match is None:
        raise ValueError("no aggregate cpu line in /proc/stat")
    fields = match["fields"].split()
    # Counters are unsigned: int() alone would take "-5", "+5" and "1_0" (checked on the fields
    # joined: each is non-empty, so all are digits exactly when their join is).
    # Each is a u64: a longer one is a garbled line (int() fails past 4300 digits).
    joined = "".join(fields)
    if fields and not (joined.isascii() and joined.isdigit() and len(max(fields, key=len)) <= U64_DIGITS):
        raise ValueError(f"bad cpu line: {('cpu ' + match['fields'])[:200]!r}")
    values = list(map(int, fields))
    if len(values) < 4:
        raise ValueError(f"short cpu line: {'cpu ' + match['fields']!r}")
    # guest and guest_nice are already counted in user and nice.
    counted = values[:8]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    total = sum(counted)
    # One newline per cpuN line (counted in place, not copied); the last may end the text without one.
    start, end = match.span("cpus")
    count = text.count("\n", start, end) + (1 if end > start and text[end - 1] != "\n" else 0)
    return CpuTimes(busy=total - idle, total=total, cpu_count=count)


def parse_loadavg(text: str) -> tuple[float, float, float]:
    """Parse /proc/loadavg into the 1, 5 and 15 minute load averages."""
    # 0.20 0.18 0.12 1/80 11206
    parts = text.split()
    if len(parts) < 3:
        raise ValueError(f"short loadavg: {text!r}")
    return float(parts[0]), float(parts[1]), float(parts[2])


def parse_meminfo(text: str, keys: Collection[str] | None = None) -> dict[str, int]:
    """Parse /proc/meminfo into bytes per key (values given in kB become bytes).

    Args:
        keys: stop once every one of these is read (``None``: read every key). A node's meminfo
            has 50-60 lines; the host collector's four keys are among the first sixteen.
    """
    out: dict[str, int] = {}
    wanted = None if keys is None else set(keys)
    for line in text.splitlines():
        # MemAvailable:   12345678 kB
        key, sep, rest = line.partition(":")
        parts = rest.split()
        # isdigit() alone would admit digits int() refuses ("²"): ASCII only. Past 64 bits (bytes,
        # once kB are counted) the line is garbled: skipped, as a line that is no number.
        if not sep or not parts or not (parts[0].isascii() and parts[0].isdigit() and len(parts[0]) <= U64_DIGITS):
            continue
        value = int(parts[0])
        name = key.strip()
        value = value * KIB if parts[1:2] == ["kB"] else value
        if value > U64_MAX:
            continue
        out[name] = value
        if wanted is not None:
            wanted.discard(name)
            if not wanted:
                break
    return out


def parse_uptime(text: str) -> float | None:
    """Parse /proc/uptime into seconds since boot; ``None`` when the file is empty or garbled."""
    # 350735.47 234388.90
    parts = text.split()
    try:
        uptime_s = float(parts[0]) if parts else None
    except ValueError:
        return None
    return uptime_s if uptime_s is not None and math.isfinite(uptime_s) and uptime_s >= 0 else None


class NetDev(msgspec.Struct, frozen=True, gc=False):
    """What one read of /proc/net/dev holds.

    Attributes:
        interfaces: counters of every well-formed interface line, by name.
        skipped: lines that are not /proc/net/dev (fewer than 16 counters, a counter that is no
            u64), each dropped on its own so the other interfaces still read.
    """

    interfaces: dict[str, NetCounters]
    skipped: tuple[str, ...] = ()


def parse_net_dev(text: str) -> NetDev:
    """Parse /proc/net/dev into per-interface counters; a line that is not /proc/net/dev is
    skipped and returned in ``skipped``, never the end of every other interface's reading."""
    out: dict[str, NetCounters] = {}
    skipped: list[str] = []
    for line in text.splitlines()[2:]:
        #   eth0: 1234 12 0 0 0 0 0 0 5678 34 0 0 0 0 0 0
        name, sep, rest = line.partition(":")
        if not sep:
            continue
        v = rest.split()[:16]
        # Counters are u64: a longer number is a garbled line (and int() fails past 4300 digits).
        # Checked on the fields joined, as parse_proc_stat does: each is non-empty, so all are
        # ASCII digits exactly when their join is.
        joined = "".join(v)
        if len(v) < 16 or not (joined.isascii() and joined.isdigit()) or len(max(v, key=len)) > U64_DIGITS:
            skipped.append(line.strip())
            continue
        n = list(map(int, v))
        if max(n) > U64_MAX:
            skipped.append(line.strip())
            continue
        # Positional, in NetCounters' field order: rx bytes, packets, errs, drop; tx the same.
        out[name.strip()] = NetCounters(n[0], n[1], n[2], n[3], n[8], n[9], n[10], n[11])
    return NetDev(interfaces=out, skipped=tuple(skipped))
