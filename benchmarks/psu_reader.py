"""Benchmark (not a test): CPU of the PSU collector's reader thread per RM1 line, over a real pty.

    PYTHONPATH=. python benchmarks/psu_reader.py [--seconds 30] [--rate 10]
    PYTHONPATH=. python benchmarks/psu_reader.py --smoke   # 2 s: shape only

A `PsuCollector` (RM1, current and PSU-side voltage configured, so the path-resistance fit
runs as on a full node) reads a pseudo-terminal; this script writes the lines a real RM1
sends at ``--rate`` windows a second (10: a 100 ms window) and reads the reader thread's own
CPU time from ``/proc/self/task/TID/schedstat`` (nanoseconds; the kernel's time in the
thread's system calls and wake-ups included) before and after. Nothing else runs in the
process, so a line costs here about what it costs in the agent, where the thread wakes for
each line with its caches cold: a warm loop over the same lines is several times cheaper
and is printed beside it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import tty
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine  # noqa: E402
from rigmon.clock import SystemClock  # noqa: E402
from rigmon.collectors.psu import PsuCollector  # noqa: E402
from rigmon.collectors.psu_lines import format_rm1  # noqa: E402
from rigmon.collectors.psu_rail import RailState  # noqa: E402
from rigmon.config import PsuSection  # noqa: E402
from rigmon.hw.root import HostRoot  # noqa: E402

PORT = "/dev/ttyACM0"


def line(i: int) -> bytes:
    body = (f"RM1,seq={i},up={100 * i},win=100,n=100,v={12010 - i % 7}/11950/12050,"
            f"i=80000/79000/81000,vpsu=12100/12050/12150")
    return (format_rm1(body) + "\r\n").encode()


def thread_cpu_s(native_id: int) -> float:
    with open(f"/proc/self/task/{native_id}/schedstat") as fh:
        return int(fh.read().split()[0]) / 1e9


def warm_us_per_line(config: PsuSection, count: int = 3000) -> float:
    state = RailState(config)
    state.opened()
    lines = [line(i) for i in range(count + 1)]
    state.feed(lines[0], 0.0, 0.0)
    t0 = time.thread_time()
    for i, raw in enumerate(lines[1:], start=1):
        state.feed(raw, i * 0.1, 1.7e9 + i * 0.1)
        state.take_events()
    return 1e6 * (time.thread_time() - t0) / count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=10.0, help="RM1 lines a second")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    seconds = 2.0 if args.smoke else args.seconds
    config = PsuSection(port=PORT, current="i", psu_side="vpsu", query_identity=False)
    with tempfile.TemporaryDirectory(prefix="rigmon-psu-reader-") as tmp:
        root = Path(tmp)
        master, slave = os.openpty()
        tty.setraw(slave)
        (root / "dev").mkdir()
        os.symlink(os.ttyname(slave), root / PORT.lstrip("/"))
        collector = PsuCollector(config, HostRoot(root), SystemClock())
        collector.start(lambda records: None)
        try:
            deadline = time.monotonic() + 5.0
            while not collector.state.connected and time.monotonic() < deadline:
                time.sleep(0.01)
            os.write(master, b"\r\n")  # the partial first line the reader drops
            time.sleep(0.2)
            reader = next(t for t in threading.enumerate() if t.name == "rigmon-psu-reader")
            assert reader.native_id is not None
            count = int(seconds * args.rate)
            before = thread_cpu_s(reader.native_id)
            t0 = time.monotonic()
            for i in range(count):
                os.write(master, line(i + 1))
                time.sleep(max(0.0, t0 + (i + 1) / args.rate - time.monotonic()))
            time.sleep(0.3)
            spent = thread_cpu_s(reader.native_id) - before
            windows = collector.state.counters.windows_total
        finally:
            collector.close()
            os.close(master)
            os.close(slave)
    print(f"PSU reader thread over a pty: {count} RM1 lines at {args.rate:g}/s; {machine()}")
    print()
    print("| figure | value |")
    print("|---|---:|")
    print(f"| windows the collector counted | {windows}/{count} |")
    print(f"| reader thread CPU per line | {1e6 * spent / count:.1f} us |")
    print(f"| reader thread CPU per second | {1000 * spent / seconds:.2f} ms |")
    print(f"| the same lines fed in a warm loop (no I/O) | {warm_us_per_line(config):.1f} us |")
    return 0 if windows == count else 1


if __name__ == "__main__":
    sys.exit(main())
