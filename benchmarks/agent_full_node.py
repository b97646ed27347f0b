"""Benchmark: agent CPU per sample on a full simulated node (8 GPUs behind the fake NVML, ADC at 10 windows/s).

The fake NVML lives in the process that calls it, so the agent runs in this process next
to the simulated node (scenario ``bench-node`` with 8 V100-SXM2 and an RM1 ADC whose window
is 100 ms), with every collector, the alarms, the journal and the HTTP server, as deployed.
A client in a separate process pulls ``/v1/latest`` once a second over one kept connection, as
Prometheus scrapes (``--new-connections``: a new connection per pull, as the script did before
round 4; node_exporter is pulled the same way in both).

What is the simulator's and is taken out:

- its physics and tree writes run in a thread of their own: that thread's CPU time
  (``time.thread_time`` inside it) is measured and subtracted;
- the fake NVML library runs on the agent's GPU threads when they call it: every call
  passes one dispatch point (``FakeNvmlLibrary.system_call``; the event wait, which does not,
  on its symbol), which this script times with the calling thread's CPU clock and subtracts.
  pynvml's function lookup and ctypes structures stay in the agent's figure, as on a real
  node; a real driver's own time is not represented;
- that timing itself (two reads of the thread's CPU clock and a lock per call) is no part of
  the agent either: its cost per call is measured in the same run and subtracted per call.

Peer in the same run: ``prometheus-node-exporter`` (when installed) reads the same simulated
tree (the collectors comparable to rigmon's host, disks, raid, nvme and hwmon ones, as in
``agent_cost.py``), scraped once a second by the same poller; the script prints the agent's
CPU per sample against it. node_exporter reads no NVML, ADC, Thunderbolt or kernel log, so
the ratio says what the full node costs over a plain exporter, not a like-for-like figure.

Before it reports, the script checks that the node it measured was healthy and fed: one
frame per second of the window (a sick node pushes extra frames for its sag windows), the ADC
windows received at the configured rate (10 a second, within 3 %), every collector ``ok``
(except the ones absent by design on this node: ``amd_gpu``, ``rail_path``, ``peer_probes``), every GPU present
and none lost, no alarm firing. Otherwise it prints why and exits 1 without a figure
(``--smoke`` prints the same check and goes on).

``--still`` measures a floor, not goal 1: the simulator is built and stepped once but its
physics thread never runs, so no file of the tree is rewritten (every read is a kept
descriptor's ``pread``), no ADC line arrives and no reading changes. The health check then
expects no ADC windows and only ``psu_adc_silent`` firing, and the output says it is a floor.

``--agent-config TOML`` measures a trade-off: its settings are merged over the node's own (say
``[collectors.nvme] interval_s = 5``) and printed with the results; the node must still hold every source.

    python benchmarks/agent_full_node.py [--seconds 60] [--gpus 8] [--still] [--agent-config TOML] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pynvml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.agent_cost import node_exporter_args, node_exporter_binary  # noqa: E402
from benchmarks.common import (  # noqa: E402
    PhysicsThread,
    cpu_seconds,
    free_port,
    machine,
    self_peak_rss_mb,
    stop,
    thread_cpu_delta_ms,
    thread_cpu_ms,
)
from rigmon.agent.agent import Agent  # noqa: E402
from rigmon.agent.gc_tuning import tune_agent_gc  # noqa: E402
from rigmon.agent.server import make_server  # noqa: E402
from rigmon.schema import CollectorState  # noqa: E402
from rigmon.sim.clock import SimClock  # noqa: E402
from rigmon.sim.node import SimNode  # noqa: E402
from rigmon.sim.nvml import FAKE_NVML  # noqa: E402
from rigmon.sim.rig import STEP_REAL_S, node_agent_config  # noqa: E402
from rigmon.sim.scenarios.bench_node import BenchNode  # noqa: E402
from rigmon.sim.tree import Tree  # noqa: E402
from rigmon.typed import TypedDataError  # noqa: E402

#: Pulls a URL once a second for N seconds and prints each answer's status. With ``keep``, one
#: connection is kept across pulls, as Prometheus keeps its scrape connections (and the dashboard its
#: stream); with ``new``, each pull opens its own connection and asks to close it.
POLLER = ("import http.client, sys, time, urllib.parse\n"
          "url, n, keep = sys.argv[1], int(sys.argv[2]), sys.argv[3] == 'keep'\n"
          "parts = urllib.parse.urlsplit(url)\n"
          "conn = None\n"
          "for _ in range(n):\n"
          "    try:\n"
          "        conn = conn or http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)\n"
          "        conn.request('GET', parts.path, headers={} if keep else {'Connection': 'close'})\n"
          "        answer = conn.getresponse(); answer.read(); print(answer.status, flush=True)\n"
          "        if not keep:\n"
          "            conn.close(); conn = None\n"
          "    except (OSError, http.client.HTTPException):\n"
          "        conn = conn and conn.close()\n"
          "    time.sleep(1.0)\n")


class FakeDriverTimer:
    """CPU time the calling threads spend inside the fake NVML library."""

    def __init__(self) -> None:
        self.cpu_s = 0.0
        self.calls = 0
        #: CPU seconds in the fake library by calling thread (``threading.get_ident()``).
        self.by_thread: dict[int, float] = {}
        #: Timed calls by calling thread (each also costs the timing itself: `overhead_s`).
        self.calls_by_thread: dict[int, int] = {}
        self._lock = threading.Lock()
        self._original: Callable[[str, Callable[..., int]], int] = FAKE_NVML.system_call
        self._wait: Callable[..., int] | None = None

    def install(self) -> None:
        original = self._original

        def timed(name: str, fn: Callable[..., int]) -> int:
            t0 = time.thread_time()
            try:
                return original(name, fn)
            finally:
                self._count(time.thread_time() - t0)

        FAKE_NVML.system_call = timed  # type: ignore[method-assign]
        # The fake's event wait does not pass `system_call` (it blocks on a condition, not the
        # machine's lock), and its timed wait costs CPU of its own: time it on its symbol too.
        wait = self._wait = FAKE_NVML.symbols.nvmlEventSetWait_v2

        def timed_wait(*args: object) -> int:
            t0 = time.thread_time()
            try:
                return int(wait(*args))
            finally:
                self._count(time.thread_time() - t0)

        FAKE_NVML.symbols.nvmlEventSetWait_v2 = timed_wait
        pynvml._nvmlGetFunctionPointer_cache.pop("nvmlEventSetWait_v2", None)

    def _count(self, spent: float) -> None:
        """One timed call of ``spent`` CPU seconds on the calling thread."""
        ident = threading.get_ident()
        with self._lock:
            self.cpu_s += spent
            self.calls += 1
            self.by_thread[ident] = self.by_thread.get(ident, 0.0) + spent
            self.calls_by_thread[ident] = self.calls_by_thread.get(ident, 0) + 1

    def remove(self) -> None:
        FAKE_NVML.__dict__.pop("system_call", None)
        if self._wait is not None:
            FAKE_NVML.symbols.nvmlEventSetWait_v2 = self._wait
            pynvml._nvmlGetFunctionPointer_cache.pop("nvmlEventSetWait_v2", None)

    @staticmethod
    def overhead_s(calls: int = 20000) -> float:
        """CPU seconds one timed call adds on top of the call itself (the clock reads and the lock)."""
        lock = threading.Lock()
        by_thread: dict[int, float] = {}
        t0 = time.thread_time()
        for _ in range(calls):
            a = time.thread_time()
            b = time.thread_time()
            ident = threading.get_ident()
            with lock:
                a += b - a
                by_thread[ident] = by_thread.get(ident, 0.0) + a
        return (time.thread_time() - t0) / calls


#: Collectors with nothing to read on ``bench-node``: no AMD GPU; the ADC measures the current itself;
#: a lone node has no peers to probe (the probes' cost is `probe_cost.py`'s, 15 peers at 10 Hz).
ABSENT_BY_DESIGN = frozenset({"amd_gpu", "rail_path", "peer_probes"})
#: Every source of the full node: none may be missing from the frame (a collector switched off by
#: ``--agent-config`` makes it a smaller node, not goal 1's).
EVERY_SOURCE = frozenset({"disks", "gpu", "gpu_processes", "host", "infiniband", "journal", "kernel_log", "nvme",
                          "psu", "psu_hwmon", "raid", "thunderbolt"})
#: ADC windows a second the node is configured for (100 ms windows).
ADC_WINDOWS_PER_S = 10.0


@dataclass(frozen=True)
class Measured:
    """What one measured window gave. CPU figures are seconds of the window unless named ``_ms``.

    Attributes:
        elapsed: the window's length, wall-clock seconds.
        frames: frames the agent published in it (seq of the last minus seq of the first).
        frames_span_s: sample time between the window's first and last frames.
        windows: ADC windows the rail collector counted in it.
        gpus: GPUs in the last frame.
        lost: of those, GPUs not ``ok``.
        statuses: each collector's state in the last frame.
        firing: the rules of the alarms firing at the end, comma-separated ("" when none).
        pulls: ``/v1/latest`` pulls answered 200 over warm-up and window; ``None``: not counted.
        cpu: the whole process's CPU.
        sim: the simulator's physics thread's CPU.
        fake: the fake NVML library's CPU, as timed on its calling threads.
        calls: fake NVML calls timed.
        timer: what timing those calls cost.
        rss: the process's peak RSS, MiB.
        steps: simulator steps.
        lag_s: how far the simulator was behind its schedule at the end.
        threads: CPU ms of each thread of the process (by name).
        fake_by_thread: of that, the fake NVML's and its timing's, ms (by thread name).
        exporter_cpu: node_exporter's CPU beside the agent; ``None`` when it did not run.
        exporter_scrapes: 1 when node_exporter still answered at the end; ``None`` when it did not run.
    """

    elapsed: float
    frames: int
    frames_span_s: float
    windows: int
    gpus: int
    lost: int
    statuses: dict[str, CollectorState]
    firing: str = ""
    pulls: int | None = None
    cpu: float = 0.0
    sim: float = 0.0
    fake: float = 0.0
    calls: int = 0
    timer: float = 0.0
    rss: float = 0.0
    steps: int = 0
    lag_s: float = 0.0
    threads: dict[str, float] = field(default_factory=dict)
    fake_by_thread: dict[str, float] = field(default_factory=dict)
    exporter_cpu: float | None = None
    exporter_scrapes: int | None = None


#: On a still node (``--still``) the ADC sends nothing: its staleness rule fires, and nothing else may.
STILL_FIRING = "psu_adc_silent"


def health_problems(r: Measured, args: argparse.Namespace) -> list[str]:
    """Why the measured node was not healthy and fed (empty when it was)."""
    problems: list[str] = []
    # Counted between the first and the last frame of the window, on the frames' own sample times:
    # counting against the window's wall clock lets a frame on either boundary read as one too many.
    spanned, frames = r.frames_span_s, r.frames
    if spanned <= 0 or abs(frames - spanned) > max(1.0, 0.02 * spanned):
        problems.append(f"{frames:.0f} frames in {spanned:.1f} s of sample time (one a second expected)")
    rate = r.windows / spanned if spanned > 0 else 0.0
    expected_rate = 0.0 if args.still else ADC_WINDOWS_PER_S
    if abs(rate - expected_rate) > 0.03 * ADC_WINDOWS_PER_S:
        problems.append(f"{rate:.1f} ADC windows/s received, {expected_rate:.0f} "
                        f"{'expected on a still node' if args.still else 'configured'}")
    if r.pulls is not None and r.pulls < r.elapsed - 1:
        problems.append(f"{r.pulls} pulls answered 200 for a {r.elapsed:.0f} s window (one a second expected)")
    for name in sorted(EVERY_SOURCE - set(r.statuses)):
        problems.append(f"collector {name} is not in the frame (switched off?)")
    for name, state in sorted(r.statuses.items()):
        if state != ("absent" if name in ABSENT_BY_DESIGN else "ok"):
            problems.append(f"collector {name} is {state}")
    if r.gpus != args.gpus or r.lost:
        problems.append(f"{r.gpus} GPUs in the last frame ({r.lost} lost), {args.gpus} simulated")
    if r.firing != (STILL_FIRING if args.still else ""):
        problems.append(f"alarms firing: {r.firing or 'none'}")
    return problems


def adc_windows(agent: Agent) -> int:
    """RM1 windows the agent's PSU collector has received so far."""
    latest = agent.buffer.latest if agent.buffer else None
    rail = latest.readings.psu_rail if latest else None
    return rail.counters.windows_total if rail is not None else 0


async def measure(args: argparse.Namespace, work: Path, tree_dir: Path) -> Measured:
    scenario = BenchNode(gpus=args.gpus, adc_window_ms=100)
    clock = SimClock(1.0)
    node = SimNode(name="node01", tree=Tree(tree_dir / "node01"), rng=random.Random("1:0"))
    scenario.build(node, 0)
    scenario.drive(node, 0, 0.0)
    node.step(0.0)
    physics = PhysicsThread(node, scenario, clock, STEP_REAL_S)
    timer = FakeDriverTimer()
    timer.install()
    if not args.still:
        physics.start()
    port = free_port()
    config = node_agent_config(node, f"127.0.0.1:{port}", 1.0, work / "state", extra=args.extra)
    agent = Agent(config, clock=clock)
    if not args.default_gc:
        tune_agent_gc()  # as `rigmon agent` does once its agent is built
    server = make_server(agent, "127.0.0.1", port)
    agent.start()
    serve = asyncio.create_task(server.serve())
    poller: subprocess.Popen[bytes] | None = None
    exporter: subprocess.Popen[bytes] | None = None
    exporter_poller: subprocess.Popen[bytes] | None = None
    exporter_cpu: float | None = None
    exporter_scrapes: int | None = None
    try:
        while not server.started:
            await asyncio.sleep(0.05)
        total_s = args.warmup + args.seconds + 2
        connections = "new" if args.new_connections else "keep"
        poller = subprocess.Popen([sys.executable, "-c", POLLER, f"http://127.0.0.1:{port}/v1/latest",
                                   str(int(total_s)), connections], stdout=subprocess.PIPE)
        binary = node_exporter_binary()
        if binary and not args.no_peer:
            exporter_port = free_port()
            exporter = subprocess.Popen(node_exporter_args(binary, node.tree.root, exporter_port),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            exporter_poller = subprocess.Popen([sys.executable, "-c", POLLER,
                                                f"http://127.0.0.1:{exporter_port}/metrics", str(int(total_s)),
                                                connections],
                                               stdout=subprocess.PIPE)
        await asyncio.sleep(args.warmup)
        pid = os.getpid()
        exporter_cpu0 = cpu_seconds(exporter.pid) if exporter is not None else 0.0
        cpu0, sim0, fake0, calls0 = cpu_seconds(pid), physics.cpu_s, timer.cpu_s, timer.calls
        threads0, fake_by_thread0, calls_by_thread0 = thread_cpu_ms(), dict(timer.by_thread), dict(timer.calls_by_thread)
        first = agent.buffer.latest if agent.buffer else None
        seq0, taken0 = (first.seq, first.taken_at) if first is not None else (0, 0.0)
        steps0, windows0 = physics.steps, adc_windows(agent)
        t0 = time.monotonic()
        await asyncio.sleep(args.seconds)
        elapsed = time.monotonic() - t0
        cpu, sim, fake, calls = (cpu_seconds(pid) - cpu0, physics.cpu_s - sim0, timer.cpu_s - fake0,
                                 timer.calls - calls0)
        threads = thread_cpu_delta_ms(threads0, thread_cpu_ms())
        idents = {t.ident: t.name for t in threading.enumerate()}
        fake_by_thread: dict[str, float] = {}
        per_call_s = FakeDriverTimer.overhead_s()
        for ident, spent in timer.by_thread.items():
            name = idents.get(ident, "(exited)")
            timed_calls = timer.calls_by_thread.get(ident, 0) - calls_by_thread0.get(ident, 0)
            # The fake library's time and the timing of its calls, both taken out of the thread's row.
            fake_by_thread[name] = fake_by_thread.get(name, 0.0) + 1000 * (
                spent - fake_by_thread0.get(ident, 0.0) + timed_calls * per_call_s)
        if exporter is not None and exporter.poll() is None:
            exporter_cpu = cpu_seconds(exporter.pid) - exporter_cpu0
            # It answered all along (its poller pulls once a second): one more pull says it still does.
            with urllib.request.urlopen(f"http://127.0.0.1:{exporter_port}/metrics", timeout=5) as answer:
                exporter_scrapes = int(b"node_md_disks" in answer.read())
        latest = agent.buffer.latest if agent.buffer else None
        assert latest is not None
        frames, frames_span_s = latest.seq - seq0, latest.taken_at - taken0
        steps, windows = physics.steps - steps0, adc_windows(agent) - windows0
        gpus_seen = len(latest.readings.gpus)
        lost = sum(1 for gpu in latest.readings.gpus if gpu.state != "ok")
        statuses = {name: s.state for name, s in latest.collectors.items()}
        firing = sorted({a.rule for a in agent.alarms.alarm_list().active if a.state == "firing"})
        lag_s = physics.lag_s
    finally:
        server.should_exit = True
        await agent.stop()
        await asyncio.gather(serve, return_exceptions=True)
        physics.stopping.set()
        if physics.is_alive():
            physics.join(5)
        timer.remove()
        node.close()
        for proc in (poller, exporter_poller, exporter):
            if proc is not None:
                stop(proc)
    # Warm-up and window together: at least one answered pull a second of the window.
    pulls = poller.stdout.read().split().count(b"200") if poller is not None and poller.stdout else 0
    timer_overhead = calls * per_call_s
    return Measured(elapsed=elapsed, frames=frames, frames_span_s=frames_span_s, windows=windows, gpus=gpus_seen,
                    lost=lost, statuses=statuses, firing=", ".join(firing), pulls=pulls, cpu=cpu, sim=sim,
                    fake=fake, calls=calls, timer=timer_overhead, rss=self_peak_rss_mb(), steps=steps, lag_s=lag_s,
                    threads=threads, fake_by_thread=fake_by_thread, exporter_cpu=exporter_cpu,
                    exporter_scrapes=exporter_scrapes)


def thread_table(r: Measured, elapsed: float) -> list[str]:
    """Markdown rows: CPU ms per second of each thread of the process in the window, the fake NVML
    library's share on that thread, and what is left for the agent (the simulator's thread is all
    simulator)."""
    threads, fake = r.threads, r.fake_by_thread
    rows = ["| thread | CPU ms per second | fake NVML and its timing in it | agent's, ms per second |", "|---|---:|---:|---:|"]
    for name, ms in threads.items():
        if ms <= 0 and not fake.get(name):
            continue
        agent_ms = 0.0 if name == "sim-physics" else ms - fake.get(name, 0.0)
        rows.append(f"| {name} | {ms / elapsed:.2f} | {fake.get(name, 0.0) / elapsed:.2f} | {agent_ms / elapsed:.2f} |")
    counted = sum(threads.values()) / 1000
    rows.append(f"| (threads that exited in the window) | "
                f"{1000 * (r.cpu - counted) / elapsed:.2f} | | |")
    return rows


def tree_filesystem(tree_dir: str | None) -> str:
    """Where the simulated node's files are, as the report says it: the directory and its filesystem type."""
    where = tree_dir or tempfile.gettempdir()
    best, kind = "", "unknown"
    with open("/proc/self/mounts", encoding="utf-8", errors="replace") as mounts:
        for line in mounts:
            fields = line.split()
            if len(fields) > 2 and os.path.realpath(where).startswith(fields[1]) and len(fields[1]) > len(best):
                best, kind = fields[1], fields[2]
    return f"{where} ({kind})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured window")
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--smoke", action="store_true", help="a couple of seconds (CI)")
    parser.add_argument("--no-peer", action="store_true", help="do not run node_exporter beside the agent")
    parser.add_argument("--new-connections", action="store_true",
                        help="each pull on a new connection (default: one kept connection, as Prometheus scrapes)")
    parser.add_argument("--still", action="store_true",
                        help="a floor: the simulator never steps (no file rewritten, no ADC line, no reading changes)")
    parser.add_argument("--default-gc", action="store_true",
                        help="keep Python's default collector settings (before/after of `tune_agent_gc`)")
    parser.add_argument("--tree-dir", metavar="DIR",
                        help="where the simulated node's files go (default: the temporary directory, with the "
                             "journal); /dev/shm keeps them in memory as a real /sys and /proc are, the journal "
                             "staying on disk: a file the simulator replaces is then freed by its reader's close "
                             "without an ext4 journal transaction")
    parser.add_argument("--agent-config", metavar="TOML",
                        help="agent settings merged over the simulated node's (a trade-off to measure, e.g. "
                             "[collectors.nvme] interval_s = 5); printed with the results")
    args = parser.parse_args()
    args.extra = None
    if args.agent_config:
        args.extra = tomllib.loads(Path(args.agent_config).read_text())
    if args.smoke:
        args.seconds, args.warmup = 2.0, 1.5
    with (tempfile.TemporaryDirectory(prefix="rigmon-bench-") as tmp,
          tempfile.TemporaryDirectory(prefix="rigmon-bench-tree-", dir=args.tree_dir) as tree):
        try:
            r = asyncio.run(measure(args, Path(tmp), Path(tree)))
        except TypedDataError as exc:
            print(f"--agent-config {args.agent_config}: {exc}", file=sys.stderr)
            return 2
    elapsed, frames = r.elapsed, max(1.0, r.frames)
    agent_s = r.cpu - r.sim - r.fake - r.timer
    if args.still:
        print("STILL NODE (--still): the simulator never stepped: no file rewritten, no ADC line, no reading "
              "changed. A floor for the agent's own work, not goal 1's measurement.")
    print(f"full simulated node: {args.gpus} V100-SXM2 (fake NVML), RM1 ADC at 10 windows/s, 2 md arrays, "
          f"2 USB4 links, 2 NICs; every collector, alarms, journal, HTTP pulled once a second "
          f"({'a new connection per pull' if args.new_connections else 'one kept connection'}); "
          f"{elapsed:.0f} s window; {machine()}")
    if args.extra:
        print(f"agent settings over the node's own (--agent-config): {args.extra}")
    print(f"simulated node's files in {tree_filesystem(args.tree_dir)}; journal in the temporary directory")
    print(f"collectors: {', '.join(f'{k}={v}' for k, v in sorted(r.statuses.items()))}")
    print(f"in the window: {r.frames:.0f} frames published (ticks, plus one per pushed sag window), "
          f"{r.windows / max(r.frames_span_s, 1e-9):.1f} ADC windows/s received, {r.steps / elapsed:.1f} simulator steps/s; "
          f"GPUs in the last frame: {r.gpus:.0f}; simulator behind its schedule by {r.lag_s:.2f} s at the end; "
          f"pulls answered 200 (warm-up and window): {r.pulls:.0f}")
    problems = health_problems(r, args)
    fed = "no ADC line, psu_adc_silent firing as expected" if args.still else "ADC at its rate"
    print(f"health: {f'ok (one frame a second, {fed}, every source present)' if not problems else 'NOT OK: ' + '; '.join(problems)}\n")
    if problems and not args.smoke:
        print("REFUSED: the node was not healthy and fed; no figure reported", file=sys.stderr)
        return 1
    print("| part of the process | CPU s | ms per second | % of one core |")
    print("|---|---:|---:|---:|")
    for name, value in (("whole process", r.cpu), ("simulator physics thread (subtracted)", r.sim),
                        (f"fake NVML library ({r.calls / elapsed:.0f} calls/s, subtracted)", r.fake),
                        ("timing the fake NVML's calls (subtracted)", r.timer),
                        ("agent = whole - simulator - fake NVML - timing", agent_s)):
        print(f"| {name} | {value:.2f} | {1000 * value / elapsed:.1f} | {100 * value / elapsed:.2f} |")
    print("\nper thread (benchmarks.common.thread_cpu_ms: each thread's CPU clock; the fake NVML's time as timed on "
          "each calling thread):")
    print("\n".join(thread_table(r, elapsed)))
    print(f"\nagent CPU per 1 s sample: {1000 * agent_s / elapsed:.1f} ms; per published frame: "
          f"{1000 * agent_s / frames:.2f} ms; peak RSS of the process (agent and simulator): {r.rss:.1f} MiB")
    exporter_cpu, scrapes = r.exporter_cpu, r.exporter_scrapes
    if exporter_cpu is not None and scrapes:
        # Its poller pulls once a second; node_exporter reads its files on every pull.
        per_scrape = exporter_cpu / elapsed
        print("\n| peer in the same run (same tree, one pull a second) | CPU ms per sample | agent / peer |")
        print("|---|---:|---:|")
        print(f"| node_exporter (host, disks, md, nvme, hwmon; no NVML, ADC, Thunderbolt, kernel log) | "
              f"{1000 * per_scrape:.2f} | {f'{agent_s / elapsed / per_scrape:.2f}' if per_scrape else '- (no CPU tick yet)'} |")
    else:
        print("\npeer: node_exporter not installed or not measured (--no-peer): no ratio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
