"""Benchmark: where one sampler tick's CPU goes, part by part, on the full simulated node.

Builds the ``bench-node`` scenario (8 GPUs behind the fake NVML by default) in this process,
runs a real agent on it for a few seconds to get a real frame, stops the agent and the
simulator, then calls each part of a tick many times on this thread and reports its CPU
time per call (``time.thread_time``; work a collector hands to another thread, such as the
NVML watchdog, is not in its figure): every collector's ``collect()``, the alarm engine on
the frame, the frame's conversion to data, its JSON encoding (``/v1/latest``, SSE, journal).
``--pyinstrument`` also prints a pyinstrument profile of the same loop.

``--live`` times the collectors as the agent's tick does instead: the simulator steps one
second between ticks (outside the timed window), so the files it rewrites are replaced under
the collectors as on the running node, and each tick's collectors share one read scope. A
static tree's figures leave out what a replaced file costs its reader (an open and a close
instead of a ``pread``); the live ones are what the collectors' thread pays per tick in
``agent_full_node.py``.

    python benchmarks/tick_profile.py [--calls 200] [--gpus 8] [--pyinstrument] [--live] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine  # noqa: E402
from rigmon.agent.agent import Agent, build_collectors  # noqa: E402
from rigmon.agent.frame_json import frame_json  # noqa: E402
from rigmon.alarms.selector import frame_data, frame_view  # noqa: E402
from rigmon.collectors.base import Collector  # noqa: E402
from rigmon.hw.root import HostRoot, read_scope  # noqa: E402
from rigmon.schema import Frame, encode  # noqa: E402
from rigmon.sim.clock import SimClock  # noqa: E402
from rigmon.sim.node import SimNode  # noqa: E402
from rigmon.sim.rig import node_agent_config  # noqa: E402
from rigmon.sim.scenarios.bench_node import BenchNode  # noqa: E402
from rigmon.sim.tree import Tree  # noqa: E402
from rigmon.typed import to_data  # noqa: E402


def per_call_ms(fn: Callable[[], object], calls: int) -> float:
    """CPU ms per call of ``fn`` on this thread, after one warm-up call.

    A full collection first: a pass of the cycle collector owed by earlier parts (~10 ms with a
    frame's records alive) must not land in this part's window and make it look slower.
    """
    fn()
    gc.collect()
    t0 = time.thread_time()
    for _ in range(calls):
        fn()
    return 1000 * (time.thread_time() - t0) / calls


def live_per_call_ms(collectors: dict[str, Collector], names: list[str], node: SimNode,
                     scenario: BenchNode, calls: int) -> dict[str, float]:
    """CPU ms per tick of each named collector, the simulator stepping a second between ticks.

    Each tick calls the collectors in turn in one read scope, as a runner's batch does
    (`rigmon.agent.collector_threads.run_batch`); the simulator's step is not timed.
    """
    spent = dict.fromkeys(names, 0.0)
    t_s = 100.0
    for tick in range(calls + 1):
        t_s += 1.0
        scenario.drive(node, 0, t_s)
        node.step(t_s)
        with read_scope():
            for name in names:
                t0 = time.thread_time()
                collectors[name].collect()
                if tick:  # the first tick warms up (opens, facts read once)
                    spent[name] += time.thread_time() - t0
    return {name: 1000 * cpu / calls for name, cpu in spent.items()}


async def real_frame(agent: Agent, node: SimNode, scenario: BenchNode, clock: SimClock) -> Frame:
    agent.start()
    for _ in range(30):
        await asyncio.sleep(0.1)
        t_s = clock.elapsed()
        scenario.drive(node, 0, t_s)
        node.step(t_s)
    await agent.stop()
    assert agent.buffer is not None and agent.buffer.latest is not None
    return agent.buffer.latest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--pyinstrument", action="store_true", help="also print a pyinstrument profile")
    parser.add_argument("--live", action="store_true",
                        help="collectors only, the simulator stepping between ticks (see the docstring)")
    parser.add_argument("--smoke", action="store_true", help="few calls (CI)")
    args = parser.parse_args()
    calls = 5 if args.smoke else args.calls
    with tempfile.TemporaryDirectory(prefix="rigmon-bench-") as tmp:
        work = Path(tmp)
        scenario = BenchNode(gpus=args.gpus, adc_window_ms=100)
        clock = SimClock(1.0)
        node = SimNode(name="node01", tree=Tree(work / "node01"), rng=random.Random("1:0"))
        scenario.build(node, 0)
        node.step(0.0)
        config = node_agent_config(node, "127.0.0.1:0", 1.0, work / "state")
        agent = Agent(config, clock=clock)
        collectors: dict[str, Collector] = {}
        try:
            frame = asyncio.run(real_frame(agent, node, scenario, clock))
            # The agent closed its collectors on stop: time a fresh set on the same tree.
            collectors = build_collectors(config, HostRoot(config.agent.root), clock)
            # psu and kernel_log are pushed from their own threads; a source the bench node does
            # not have (amd_gpu, infiniband...) is absent in the frame and has nothing to time.
            absent = {name for name, status in frame.collectors.items() if status.state == "absent"}
            if args.live:
                names = [name for name, c in collectors.items()
                         if name not in ("psu", "kernel_log") and name not in absent]
                live = live_per_call_ms(collectors, names, node, scenario, calls)
                results = [(f"collector {name}: collect(), live", ms) for name, ms in live.items()]
                results.append(("all collectors of a tick, live", sum(live.values())))
            else:
                parts: list[tuple[str, Callable[[], object]]] = [
                    (f"collector {name}: collect()", c.collect) for name, c in collectors.items()
                    if name not in ("psu", "kernel_log") and name not in absent
                ]
                engine = agent.alarms.engine
                parts += [
                    (f"alarm engine: evaluate(frame), {len(engine.rules)} rules", lambda: engine.evaluate(frame)),
                    ("frame_view(frame) (the alarm engine's input, since round 3)", lambda: frame_view(frame)),
                    ("frame_data(frame) (plain data: the engine's input before round 3)", lambda: frame_data(frame)),
                    ("to_data(frame)", lambda: to_data(frame)),
                    ("encode(frame) (the first reader of a frame)", lambda: encode(frame)),
                    ("frame_json(frame) (every later reader: /v1/latest, SSE, journal)", lambda: frame_json(frame)),
                ]
                results = [(name, per_call_ms(fn, calls)) for name, fn in parts]
                if args.pyinstrument:
                    # Optional (not a test dependency), hence imported by name: mypy need not find it.
                    Profiler = importlib.import_module("pyinstrument").Profiler

                    with Profiler(interval=0.0002) as profiler:
                        for _ in range(calls):
                            for _, fn in parts:
                                fn()
                    print(profiler.output_text(unicode=False, color=False, show_all=False))
        finally:
            for collector in collectors.values():
                collector.close()
            node.close()
    return report(args, frame, calls, results)


def report(args: argparse.Namespace, frame: Frame, calls: int, results: list[tuple[str, float]]) -> int:
    """Print the table; the exit status."""
    how = "ticks, the simulator stepping between them," if args.live else "calls"
    print(f"tick parts on bench-node ({args.gpus} GPUs, {len(frame.readings.gpus)} in the frame), "
          f"CPU per call over {calls} {how} on this thread; {machine()}")
    print("| part | ms per call |")
    print("|---|---:|")
    for name, ms in results:
        print(f"| {name} | {ms:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
