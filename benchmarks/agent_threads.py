"""Benchmark: the full simulated node's agent CPU per thread, with the fake NVML's own time taken out per thread.

Runs the same node as ``agent_full_node.py`` (``bench-node``, 8 V100-SXM2 behind the fake NVML,
RM1 ADC at 10 windows/s, every collector, alarms, journal, HTTP pulled once a second) in this
process, and over the window reads every thread's CPU time from its own CPU clock
(``pthread_getcpuclockid``, nanoseconds; pool threads sharing a prefix are summed under their
name). The fake NVML library runs inside the threads that call it (``rigmon-nvml-poll``, the
Xid wait's thread): its calls are timed at their single dispatch point (and its event wait,
which does not pass it, at its symbol) with the calling thread's CPU clock, per thread, and
shown apart; the ``agent`` column is the thread's time minus the fake driver's and minus the
cost of timing it.

    python benchmarks/agent_threads.py [--seconds 30] [--gpus 8] [--runs 1] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pynvml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.agent_full_node import POLLER, FakeDriverTimer  # noqa: E402
from benchmarks.common import CLOCK_TICKS, PhysicsThread, free_port, machine, stop  # noqa: E402
from rigmon.agent.agent import Agent  # noqa: E402
from rigmon.agent.server import make_server  # noqa: E402
from rigmon.sim.clock import SimClock  # noqa: E402
from rigmon.sim.node import SimNode  # noqa: E402
from rigmon.sim.nvml import FAKE_NVML  # noqa: E402
from rigmon.sim.rig import STEP_REAL_S, node_agent_config  # noqa: E402
from rigmon.sim.scenarios.bench_node import BenchNode  # noqa: E402
from rigmon.sim.tree import Tree  # noqa: E402

#: The threads this benchmark is about (collectors' pool, NVML poll and event threads, the Xid
#: waiter, the udev tty watcher); the others are listed too, for the total.
OURS = ("rigmon-collectors", "rigmon-nvml-poll", "rigmon-nvml-events", "rigmon-gpu-xid", "rigmon-tty-udev")


def thread_name(name: str) -> str:
    """A pool thread's name without its worker number (``rigmon-nvml-poll_0`` -> ``rigmon-nvml-poll``)."""
    return re.sub(r"_\d+$", "", name)


def thread_cpu_ms() -> dict[str, float]:
    """CPU time (user + system, ms) of every Python thread of this process, by thread name.

    Read from each thread's own CPU clock (``pthread_getcpuclockid``, nanoseconds), not from
    ``/proc/self/task/TID/stat``, whose 10 ms ticks are too coarse for threads that spend about
    a millisecond a second. Tasks that are no Python thread are taken from ``/proc`` (ticks).
    """
    cpu: dict[str, float] = defaultdict(float)
    python_tids = set()
    for thread in threading.enumerate():
        if thread.ident is None or thread.native_id is None:
            continue
        try:
            clock = time.pthread_getcpuclockid(thread.ident)
            cpu[thread_name(thread.name)] += 1000 * time.clock_gettime(clock)
        except (OSError, ProcessLookupError):
            continue  # the thread ended between the listing and the read
        python_tids.add(thread.native_id)
    for task in Path("/proc/self/task").iterdir():
        if int(task.name) in python_tids:
            continue
        try:
            head, tail = (task / "stat").read_text().rsplit(")", 1)
        except (OSError, ValueError):
            continue
        fields = tail.split()
        cpu["native:" + head.split("(", 1)[1]] += 1000 * (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return cpu


class PerThreadDriverTimer:
    """CPU time each thread spends inside the fake NVML library (and the calls it made)."""

    def __init__(self) -> None:
        self.cpu_s: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()
        self._original: Callable[[str, Callable[..., int]], int] = FAKE_NVML._system
        self._wait: Callable[..., int] = FAKE_NVML.symbols.nvmlEventSetWait_v2

    def install(self) -> None:
        original = self._original

        def timed(name: str, fn: Callable[..., int], direct: bool = False) -> int:
            t0 = time.thread_time()
            try:
                return fn(None) if direct else original(name, fn)
            finally:
                spent = time.thread_time() - t0
                who = thread_name(threading.current_thread().name)
                with self._lock:
                    self.cpu_s[who] += spent
                    self.calls[who] += 1

        FAKE_NVML._system = timed  # type: ignore[method-assign]
        # The fake's event wait does not pass `_system` (it blocks on a condition, not the
        # machine's lock); its timed wait costs CPU of its own on this machine: time it too.
        wait = self._wait = FAKE_NVML.symbols.nvmlEventSetWait_v2

        def timed_wait(*args: object) -> int:
            return timed("nvmlEventSetWait_v2", lambda _machine: int(wait(*args)), direct=True)

        FAKE_NVML.symbols.nvmlEventSetWait_v2 = timed_wait
        pynvml._nvmlGetFunctionPointer_cache.pop("nvmlEventSetWait_v2", None)

    def remove(self) -> None:
        FAKE_NVML.__dict__.pop("_system", None)
        FAKE_NVML.symbols.nvmlEventSetWait_v2 = self._wait
        pynvml._nvmlGetFunctionPointer_cache.pop("nvmlEventSetWait_v2", None)

    def snapshot(self) -> tuple[dict[str, float], dict[str, int]]:
        with self._lock:
            return dict(self.cpu_s), dict(self.calls)


async def measure(args: argparse.Namespace, work: Path) -> dict[str, object]:
    scenario = BenchNode(gpus=args.gpus, adc_window_ms=100)
    clock = SimClock(1.0)
    node = SimNode(name="node01", tree=Tree(work / "node01"), rng=random.Random("1:0"))
    scenario.build(node, 0)
    scenario.drive(node, 0, 0.0)
    node.step(0.0)
    physics = PhysicsThread(node, scenario, clock, STEP_REAL_S)
    timer = PerThreadDriverTimer()
    timer.install()
    physics.start()
    port = free_port()
    config = node_agent_config(node, f"127.0.0.1:{port}", 1.0, work / "state")
    agent = Agent(config, clock=clock)
    server = make_server(agent, "127.0.0.1", port)
    agent.start()
    serve = asyncio.create_task(server.serve())
    poller: subprocess.Popen[bytes] | None = None
    try:
        while not server.started:
            await asyncio.sleep(0.05)
        poller = subprocess.Popen([sys.executable, "-c", POLLER, f"http://127.0.0.1:{port}/v1/latest",
                                   str(int(args.warmup + args.seconds + 2))], stdout=subprocess.PIPE)
        await asyncio.sleep(args.warmup)
        cpu0, (fake0, calls0) = thread_cpu_ms(), timer.snapshot()
        seq0 = agent.buffer.latest.seq if agent.buffer and agent.buffer.latest else 0
        t0 = time.monotonic()
        await asyncio.sleep(args.seconds)
        elapsed = time.monotonic() - t0
        cpu1, (fake1, calls1) = thread_cpu_ms(), timer.snapshot()
        latest = agent.buffer.latest if agent.buffer else None
        assert latest is not None
        frames = latest.seq - seq0
        statuses = {name: s.state for name, s in latest.collectors.items()}
        gpus = sum(1 for gpu in latest.readings.gpus if gpu.state == "ok")
    finally:
        server.should_exit = True
        await agent.stop()
        await asyncio.gather(serve, return_exceptions=True)
        physics.stopping.set()
        physics.join(5)
        timer.remove()
        node.close()
        if poller is not None:
            stop(poller)
    cpu_ms = {name: cpu1[name] - cpu0.get(name, 0.0) for name in cpu1}
    fake_ms = {name: 1000 * (fake1[name] - fake0.get(name, 0.0)) for name in fake1}
    calls = {name: calls1[name] - calls0.get(name, 0) for name in calls1}
    return {"elapsed": elapsed, "cpu_ms": cpu_ms, "fake_ms": fake_ms, "calls": calls, "frames": frames,
            "statuses": statuses, "gpus": gpus}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="measured window")
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--runs", type=int, default=1, help="runs; the table shows each run and the median")
    parser.add_argument("--smoke", action="store_true", help="a couple of seconds (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.warmup, args.runs = 2.0, 1.5, 1
    timing_s = FakeDriverTimer.overhead_s()
    results = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="rigmon-bench-") as tmp:
            results.append(asyncio.run(measure(args, Path(tmp))))
    print(f"agent threads on the full simulated node: {args.gpus} V100-SXM2 (fake NVML), RM1 ADC at 10 windows/s; "
          f"{args.seconds:.0f} s window x {args.runs}; load average {os.getloadavg()[0]:.2f}; {machine()}")
    for r in results:
        bad = {k: v for k, v in r["statuses"].items() if v not in ("ok", "absent")}  # type: ignore[attr-defined]
        print(f"run: {r['frames']} frames in {r['elapsed']:.1f} s, {r['gpus']} GPUs ok, "
              f"collectors not ok: {bad or 'none'}")
    names = sorted({n for r in results for n in r["cpu_ms"]},  # type: ignore[attr-defined]
                   key=lambda n: (n not in OURS, OURS.index(n) if n in OURS else 0, n))

    def per_s(r: dict[str, object], name: str) -> tuple[float, float, float]:
        elapsed = float(r["elapsed"])  # type: ignore[arg-type]
        cpu = r["cpu_ms"].get(name, 0.0)  # type: ignore[attr-defined]
        fake = r["fake_ms"].get(name, 0.0)  # type: ignore[attr-defined]
        calls = r["calls"].get(name, 0)  # type: ignore[attr-defined]
        agent = cpu - fake - 1000 * timing_s * calls
        return cpu / elapsed, fake / elapsed, agent / elapsed

    def median(values: list[float]) -> float:
        ordered = sorted(values)
        mid = len(ordered) // 2
        return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2

    print("\n| thread | CPU ms/s (whole) | fake NVML ms/s | agent ms/s per run | agent ms/s median |")
    print("|---|---:|---:|---:|---:|")
    for name in names:
        rows = [per_s(r, name) for r in results]
        agent = [a for _, _, a in rows]
        print(f"| {name} | {median([c for c, _, _ in rows]):.2f} | {median([f for _, f, _ in rows]):.2f} | "
              f"{' / '.join(f'{a:.2f}' for a in agent)} | {median(agent):.2f} |")
    ours = [sum(per_s(r, n)[2] for n in ("rigmon-collectors", "rigmon-nvml-poll")) for r in results]
    events = [sum(per_s(r, n)[2] for n in ("rigmon-nvml-events", "rigmon-gpu-xid", "rigmon-tty-udev"))
              for r in results]
    print(f"\ncollectors + nvml-poll (agent's own): {' / '.join(f'{v:.2f}' for v in ours)} ms/s, "
          f"median {median(ours):.2f}")
    print(f"nvml-events + gpu-xid + tty-udev: {' / '.join(f'{v:.2f}' for v in events)} ms/s, "
          f"median {median(events):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
