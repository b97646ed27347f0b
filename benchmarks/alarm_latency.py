"""Benchmark: latency from a pushed reading to (a) the alarm firing in the agent and (b) the
webhook request arriving at a receiver on 127.0.0.1. Not a test.

The ADC source is not part of this build, so a collector test double pushes the readings
from its own thread (as the ADC reader will: `push([...])`), and a threshold rule on that
reading stands in for the rail rule. Each run pushes a reading past the threshold, waits
for the firing and the webhook, then pushes a normal reading and waits for the resolution.

    PYTHONPATH=$PWD python benchmarks/alarm_latency.py [--runs 300]
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rigmon.agent.agent import Agent
from rigmon.alarms.lifecycle import Transition
from rigmon.alarms.rules import parse_rules
from rigmon.collectors.base import PolledCollector, PushFn
from rigmon.config import AgentConfig, AgentSection, NotifySection
from rigmon.schema import TemperatureReading

RULES = parse_rules("""
[[rule]]
name = "bench_sag"
kind = "threshold"
severity = "critical"
select = "temperatures[sensor=bench].temp_c"
below = 11.5
subject = "bench"
""", "benchmark")


class PushingDouble(PolledCollector):
    """Stands in for a pushed source: readings arrive from a thread of their own."""

    name = "bench"

    def __init__(self) -> None:
        self.push: PushFn | None = None

    def collect(self) -> Sequence[object]:
        return []

    def start(self, push: PushFn) -> None:
        self.push = push

    def send(self, value: float) -> None:
        assert self.push is not None
        self.push([TemperatureReading(sensor="bench", label="bench", temp_c=value)])


class Marks:
    def __init__(self) -> None:
        self.fired = threading.Event()
        self.resolved = threading.Event()
        self.hook_fired = threading.Event()
        self.fired_at = 0.0
        self.hook_at = 0.0

    def on_transition(self, t: Transition) -> None:
        if t.change == "firing":
            self.fired_at = time.perf_counter()
            self.fired.set()
        elif t.change == "resolved":
            self.resolved.set()


def start_receiver(marks: Marks) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            arrived = time.perf_counter()
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            if b'"status":"firing"' in body:
                marks.hook_at = arrived
                marks.hook_fired.set()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/hook"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def main(runs: int) -> None:
    marks = Marks()
    server, url = start_receiver(marks)
    probe = PushingDouble()
    with tempfile.TemporaryDirectory() as root:
        config = AgentConfig(
            agent=AgentSection(node="bench", root=root, interval_s=30.0),
            notify=(NotifySection(kind="webhook", url=url, dedup_s=0.0, max_per_minute=100000),),
        )
        agent = Agent(config, collectors={"bench": probe}, rules=RULES)
        agent.alarms.hooks.append(marks.on_transition)
        agent.start()
        while probe.push is None:
            await asyncio.sleep(0.01)
        to_alarm: list[float] = []
        to_webhook: list[float] = []

        def drive() -> None:
            for _ in range(runs):
                marks.fired.clear()
                marks.hook_fired.clear()
                marks.resolved.clear()
                t0 = time.perf_counter()
                probe.send(11.3)
                if not (marks.fired.wait(10) and marks.hook_fired.wait(10)):
                    raise RuntimeError("no firing within 10 s")
                to_alarm.append(marks.fired_at - t0)
                to_webhook.append(marks.hook_at - t0)
                probe.send(12.0)
                if not marks.resolved.wait(10):
                    raise RuntimeError("no resolution within 10 s")
                time.sleep(0.005)

        await asyncio.get_running_loop().run_in_executor(None, drive)
        await agent.stop()
    server.shutdown()
    ms = 1000.0
    print(f"alarm latency over {runs} runs ({platform.python_implementation()} {platform.python_version()}, "
          f"{platform.machine()}); source: a collector test double pushing from its own thread (no ADC in this build)")
    print("| path | median | p99 | max |")
    print("|---|---|---|---|")
    for name, values in (("pushed reading -> alarm firing in the agent", to_alarm),
                         ("pushed reading -> webhook request at the receiver", to_webhook)):
        print(f"| {name} | {statistics.median(values) * ms:.2f} ms | {pct(values, 0.99) * ms:.2f} ms | "
              f"{max(values) * ms:.2f} ms |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    asyncio.run(main(parser.parse_args().runs))
