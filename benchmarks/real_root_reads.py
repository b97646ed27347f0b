"""Benchmark: the polled collectors on this machine's own /proc and /sys, with and without kept-open descriptors.

The simulator's tree is made of regular files that it replaces by rename: `HostRoot` keeps
them open too, but checks each kept one for replacement (an ``fstat`` after each ``pread``) and
opens a replaced one for every read, so the full-node benchmarks cannot show what keeping
sysfs and procfs files open saves on a real node (no check, nothing replaced). This script runs the
collectors that read only files (host, disks, raid, nvme, thunderbolt, infiniband, amd_gpu,
psu_hwmon, gpu_processes' /proc part) against ``/`` of the machine it runs on, read-only, and
times ``collect()`` on this thread (``time.thread_time``) with ``HostRoot("/", keep_fds=...)``
on and off, alternately. Collectors with nothing to read here (no md arrays, no NVMe...) are
listed as absent and not timed. Reads ``/proc`` and ``/sys`` only; writes nothing.

    python benchmarks/real_root_reads.py [--calls 500] [--rounds 3] [--smoke]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine  # noqa: E402
from rigmon.clock import SystemClock  # noqa: E402
from rigmon.collectors import REGISTRY  # noqa: E402
from rigmon.collectors.base import Collector, CollectorContext, NoData  # noqa: E402
from rigmon.config import AgentConfig  # noqa: E402
from rigmon.hw.root import HostRoot, read_scope  # noqa: E402

#: The collectors that read sysfs and procfs (the GPU ones read NVML; the PSU a serial line).
FACTORIES: dict[str, Callable[[CollectorContext], Collector]] = {
    name: REGISTRY[name] for name in ("host", "disks", "raid", "nvme", "thunderbolt", "infiniband", "psu_hwmon")
}


def collectors(keep_fds: bool) -> tuple[dict[str, Collector], HostRoot]:
    root = HostRoot("/", keep_fds=keep_fds)
    ctx = CollectorContext(root=root, clock=SystemClock(), config=AgentConfig())
    return {name: make(ctx) for name, make in FACTORIES.items()}, root


def per_call_ms(collector: Collector, calls: int) -> float:
    """CPU per ``collect()``, each in a read scope of its own as in a sampler tick (only such
    reads keep descriptors; a tick's other collectors are not run, so nothing is shared)."""
    with read_scope():
        collector.collect()
    t0 = time.thread_time()
    for _ in range(calls):
        with read_scope():
            collector.collect()
    return 1000 * (time.thread_time() - t0) / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="few calls (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.calls, args.rounds = 5, 1
    present: list[str] = []
    absent: dict[str, str] = {}
    probe, _ = collectors(keep_fds=False)
    for name, collector in probe.items():
        try:
            collector.collect()
            present.append(name)
        except NoData as exc:
            absent[name] = str(exc) or "not present"
    times: dict[tuple[str, bool], list[float]] = {}
    kept = 0
    for _ in range(args.rounds):
        for keep in (False, True):
            built, root = collectors(keep)
            for name in present:
                times.setdefault((name, keep), []).append(per_call_ms(built[name], args.calls))
            if keep:
                kept = root.kept_fds()
    print(f"polled collectors on this machine's own / (read-only), CPU per collect() on this thread, "
          f"median of {args.rounds} rounds x {args.calls} calls; {machine()}")
    print(f"absent here: {', '.join(f'{k} ({v})' for k, v in absent.items()) or 'none'}")
    print("\n| collector | open per read, ms | kept descriptors + pread, ms | saved |")
    print("|---|---:|---:|---:|")
    total_open = total_kept = 0.0
    for name in present:
        opened = statistics.median(times[(name, False)])
        kept_ms = statistics.median(times[(name, True)])
        total_open += opened
        total_kept += kept_ms
        saved = f"{100 * (1 - kept_ms / opened):.0f} %" if opened else "-"
        print(f"| {name} | {opened:.3f} | {kept_ms:.3f} | {saved} |")
    saved = f"{100 * (1 - total_kept / total_open):.0f} %" if total_open else "-"
    print(f"| **all of them** | **{total_open:.3f}** | **{total_kept:.3f}** | **{saved}** |")
    print(f"\ndescriptors kept by the timing thread: {kept}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
