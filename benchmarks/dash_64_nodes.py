"""Benchmark: the dashboard following 64 simulated nodes, headless; its CPU and peak memory.

The simulated agents run in a separate `rigmon sim` process, so the figures are the
dashboard's own. Run from the repository root:

    PYTHONPATH=$PWD python benchmarks/dash_64_nodes.py [--nodes 64] [--warmup 20] [--seconds 60] [--scenario NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rigmon.cli import _read_urls  # noqa: E402
from rigmon.cluster.config import NodeTarget  # noqa: E402
from rigmon.tui.app import RigmonApp  # noqa: E402


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def measure(urls: list[str], warmup_s: float, seconds: float) -> dict[str, float]:
    app = RigmonApp([NodeTarget(u) for u in urls])
    async with app.run_test(size=(200, 60)) as pilot:
        await asyncio.sleep(warmup_s)
        live_before = app.cluster.counts()["live"]
        cpu0, wall0 = cpu_s(), time.monotonic()
        frames0 = sum(s.history.seqs()[-1] if len(s.history) else 0 for s in app.cluster.nodes.values())
        await asyncio.sleep(seconds)
        cpu1, wall1 = cpu_s(), time.monotonic()
        frames1 = sum(s.history.seqs()[-1] if len(s.history) else 0 for s in app.cluster.nodes.values())
        live_after = app.cluster.counts()["live"]
        await pilot.press("q")
    return {
        "cpu_per_s": (cpu1 - cpu0) / (wall1 - wall0),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "frames_per_s": (frames1 - frames0) / (wall1 - wall0),
        "live_before": live_before,
        "live_after": live_after,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds before measuring")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds measured")
    parser.add_argument("--scenario", default="undervolt-bus-drop",
                        help="simulator scenario (default: 4 GPUs, the rail ADC, PMBus PSUs per node)")
    parser.add_argument("--smoke", action="store_true", help="2 healthy nodes for a few seconds (CI; no figures claimed)")
    args = parser.parse_args()
    if args.smoke:
        args.nodes, args.warmup, args.seconds, args.scenario = 2, 3.0, 2.0, "healthy"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    sim = subprocess.Popen(
        [sys.executable, "-m", "rigmon", "sim", "--scenario", args.scenario, "--nodes", str(args.nodes),
         "--base-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )
    try:
        urls = _read_urls(sim, args.nodes, 120)
        if urls is None:
            print("simulator did not start", file=sys.stderr)
            return 1
        result = asyncio.run(measure(urls, args.warmup, args.seconds))
    finally:
        sim.terminate()
        try:
            sim.wait(20)
        except subprocess.TimeoutExpired:
            # 64 agents with their GPUs and ADC threads can take longer to stop than to ask.
            sim.kill()
            sim.wait()
    print(f"nodes: {args.nodes} ({args.scenario}), measured {args.seconds:.0f} s after {args.warmup:.0f} s warm-up")
    print(f"live nodes: {result['live_before']:.0f} before, {result['live_after']:.0f} after")
    print(f"frames filed: {result['frames_per_s']:.1f} per second")
    print(f"dashboard CPU: {result['cpu_per_s'] * 100:.1f} % of one core")
    print(f"dashboard peak RSS: {result['peak_rss_mb']:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
