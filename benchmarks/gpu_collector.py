"""Benchmark (not a test): GPU collector cost per cycle for 8 simulated V100-SXM2 under load.

Run from the repository root:

    python benchmarks/gpu_collector.py [--cycles 300] [--gpus 8] [--smoke]

Each cycle is one `GpuCollector.collect()`: device count and every GPU's readings (power,
the power sample buffer in one call, limits, clocks, reasons, violation counters, PCIe link;
energy, PCIe replays, ECC, NVLink states and error counters in one field-values call; identity,
handle and maximum figures every 60 cycles) through pynvml's function table into the fake
library, in one watchdog hand-off, plus the sysfs PCI list and the kernel log. The simulated GPUs advance
1 s between cycles, so every cycle reads ~20 fresh power samples per GPU. Wall time per
cycle moves with the machine's load; CPU per cycle (this process, the watchdog thread
included) is the figure to compare; the NVML calls per GPU are counted by the fake driver.
Prints the figures and writes them to benchmarks/results-gpu.md.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rigmon.collectors.gpu import GpuCollector  # noqa: E402
from rigmon.hw.nvml import open_nvml  # noqa: E402
from rigmon.hw.root import HostRoot  # noqa: E402
from rigmon.sim.gpu import SimNvidiaGpus  # noqa: E402
from rigmon.sim.kmsg import SimKernelLog  # noqa: E402
from rigmon.sim.load import training_load  # noqa: E402
from rigmon.sim.node import SimNode  # noqa: E402
from rigmon.sim.nvml import v100_sxm2_gpus  # noqa: E402
from rigmon.sim.tree import Tree  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results-gpu.md"


class BenchClock:
    def __init__(self) -> None:
        self.t_s = 0.0

    def time(self) -> float:
        return 1_700_000_000.0 + self.t_s

    def monotonic(self) -> float:
        return self.t_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--smoke", action="store_true", help="5 cycles, results file left alone (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.cycles = 5
    with tempfile.TemporaryDirectory(prefix="rigmon-bench-") as tmp:
        node = SimNode(name="bench", tree=Tree(Path(tmp)), rng=random.Random(1))
        kernel_log = SimKernelLog()
        gpus = SimNvidiaGpus(v100_sxm2_gpus(args.gpus), kernel_log=kernel_log, load_fn=training_load)
        node.devices += [kernel_log, gpus]
        clock = BenchClock()
        node.step(0.0)
        root = HostRoot(node.tree.root)
        collector = GpuCollector(open_nvml(root), root, clock)
        durations_ms: list[float] = []
        cpu_ms: list[float] = []
        try:
            collector.collect()  # inventory, lazy init
            # Older fake drivers do not count calls (a run of an earlier commit): shown as "-".
            counted = getattr(gpus.machine, "calls", None)
            calls0 = sum(counted.values()) if counted is not None else 0
            for cycle in range(1, args.cycles + 1):
                clock.t_s = 10.0 + cycle
                node.step(clock.t_s)
                t0, c0 = time.perf_counter(), time.process_time()
                records = collector.collect()
                durations_ms.append((time.perf_counter() - t0) * 1000)
                cpu_ms.append((time.process_time() - c0) * 1000)
                assert len(records) == args.gpus
            calls_per_gpu = ((sum(counted.values()) - calls0) / args.cycles / args.gpus if counted is not None
                             else float("nan"))
        finally:
            collector.close()
            node.close()
    durations_ms.sort()
    cpu_mean, cpu_p50 = statistics.fmean(cpu_ms), statistics.median(cpu_ms)
    mean = statistics.fmean(durations_ms)
    p50 = durations_ms[len(durations_ms) // 2]
    p95 = durations_ms[int(len(durations_ms) * 0.95) - 1]
    worst = durations_ms[-1]
    command = f"PYTHONPATH=$PWD python benchmarks/gpu_collector.py --cycles {args.cycles} --gpus {args.gpus}"
    lines = [
        "## GPU collector cost per cycle",
        "",
        f"`{command}`",
        "",
        f"{args.gpus} simulated Tesla V100-SXM2-16GB behind the fake NVML (real pynvml wrappers), "
        f"{args.cycles} cycles, ~20 new power samples per GPU per cycle.",
        f"Python {platform.python_version()} on {platform.machine()}, {platform.system()} {platform.release()}.",
        "",
        "| wall mean | p50 | p95 | max | per GPU (mean) | CPU mean | CPU p50 | CPU per GPU | NVML calls per GPU |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {mean:.2f} ms | {p50:.2f} ms | {p95:.2f} ms | {worst:.2f} ms | {mean / args.gpus:.2f} ms | "
        f"{cpu_mean:.2f} ms | {cpu_p50:.2f} ms | {cpu_mean / args.gpus:.2f} ms | {calls_per_gpu:.1f} |",
        "",
        f"Each cycle is {calls_per_gpu:.0f} NVML calls per GPU (as counted by the fake driver) through "
        "pynvml, one watchdog hand-off for all GPUs, the sysfs PCI list and the kernel log. The figures "
        "include the fake library's own Python time, so they overstate rigmon's overhead; a real driver's "
        "per-call latency is not represented. Wall time moves with the load of the machine (2 cores shared "
        "with other jobs); CPU time (process_time, every thread) is the figure to compare.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.smoke:
        RESULTS.write_text(text)
        print(f"written to {RESULTS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
