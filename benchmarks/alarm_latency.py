"""Benchmark: latency from an RM1 sag line written to a pty to (a) the alarm firing in the agent and (b) the webhook.

A real pseudo-terminal stands for the ADC's USB serial port (linked at
``/dev/serial/by-id/...`` below the agent's root, as udev would). The agent runs in this
process with the real PSU collector (pyserial reader thread), the shipped default rules
(``psu_rail_low_critical``: window minimum below 11.5 V) and a webhook notifier posting to
an ``http.server`` receiver on 127.0.0.1. Each run writes one RM1 window whose minimum is
11.384 V and waits for the critical alarm's ``firing`` transition and for its webhook
request; then it writes normal windows until the alarm resolves. Times are from just
before ``os.write`` on the pty's master side.

    python benchmarks/alarm_latency.py [--runs 300] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
import tty
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, percentile  # noqa: E402
from rigmon.agent.agent import Agent  # noqa: E402
from rigmon.alarms.lifecycle import Transition  # noqa: E402
from rigmon.collectors.psu_lines import format_rm1  # noqa: E402
from rigmon.config import AgentConfig, AgentSection, AlarmsSection, NotifySection, PsuSection  # noqa: E402

LINK = "/dev/serial/by-id/usb-rigmon_rm1-if00"
RULE = "psu_rail_low_critical"
SAG_MIN_MV = 11384
NORMAL_MIN_MV = 11980


class Marks:
    """When the alarm fired in the agent and when its webhook arrived."""

    def __init__(self) -> None:
        self.fired = threading.Event()
        self.resolved = threading.Event()
        self.hook_fired = threading.Event()
        self.fired_at = 0.0
        self.hook_at = 0.0

    def on_transition(self, t: Transition) -> None:
        if t.alarm.rule != RULE:
            return
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
            if b'"status":"firing"' in body and RULE.encode() in body:
                marks.hook_at = arrived
                marks.hook_fired.set()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/hook"


class Adc:
    """The ADC side of the pty: writes RM1 windows with increasing sequence numbers."""

    def __init__(self, root: Path) -> None:
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        link = root / LINK.lstrip("/")
        link.parent.mkdir(parents=True)
        os.symlink(os.ttyname(self.slave), link)
        self.seq = 0

    def window(self, min_mv: int) -> None:
        line = format_rm1(f"RM1,seq={self.seq},up={100 * (self.seq + 1)},win=100,n=100,"
                          f"v={max(min_mv, 11990)}/{min_mv}/12040,i=95000/94000/96000,vpsu=12180/12170/12190")
        self.seq += 1
        data = (line + "\r\n").encode()
        while data:
            data = data[os.write(self.master, data):]

    def close(self) -> None:
        os.close(self.master)
        os.close(self.slave)


async def measure(runs: int) -> tuple[list[float], list[float]]:
    marks = Marks()
    server, url = start_receiver(marks)
    to_alarm: list[float] = []
    to_webhook: list[float] = []
    with tempfile.TemporaryDirectory(prefix="rigmon-bench-") as tmp:
        root = Path(tmp)
        adc = Adc(root)
        config = AgentConfig(
            agent=AgentSection(node="bench", root=str(root), interval_s=0.25),
            psu=PsuSection(port=LINK, protocol="rm1"),
            notify=(NotifySection(kind="webhook", url=url, dedup_s=0.0, max_per_minute=100000),),
            # The shipped rail rules hold a resolved sag for 60 s (so a rail sagging on every step
            # stays one alarm); only firing is timed here, so resolve at once between runs.
            alarms=AlarmsSection(overrides={name: {"clear_hold_s": 0.0}
                                            for name in ("psu_rail_low_warning", "psu_rail_low_critical")}),
        )
        agent = Agent(config)
        agent.alarms.hooks.append(marks.on_transition)
        agent.start()

        def drive() -> None:
            # The reader drops the first (maybe partial) line by design: send normal windows
            # until one has reached a frame.
            deadline = time.monotonic() + 20
            while not (agent.buffer and agent.buffer.latest and agent.buffer.latest.readings.psu_rail
                       and agent.buffer.latest.readings.psu_rail.counters.windows_total >= 2):
                if time.monotonic() > deadline:
                    raise RuntimeError("the PSU collector read no window within 20 s")
                adc.window(NORMAL_MIN_MV)
                time.sleep(0.1)
            for _ in range(runs):
                marks.fired.clear()
                marks.hook_fired.clear()
                marks.resolved.clear()
                t0 = time.perf_counter()
                adc.window(SAG_MIN_MV)
                if not (marks.fired.wait(10) and marks.hook_fired.wait(10)):
                    raise RuntimeError("no firing within 10 s")
                to_alarm.append(marks.fired_at - t0)
                to_webhook.append(marks.hook_at - t0)
                while not marks.resolved.wait(0.1):
                    adc.window(NORMAL_MIN_MV)

        try:
            await asyncio.get_running_loop().run_in_executor(None, drive)
        finally:
            await agent.stop()
            adc.close()
            server.shutdown()
    return to_alarm, to_webhook


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--smoke", action="store_true", help="a few runs (CI)")
    args = parser.parse_args()
    runs = 3 if args.smoke else args.runs
    to_alarm, to_webhook = asyncio.run(measure(runs))
    ms = 1000.0
    print(f"alarm latency over {runs} runs: RM1 sag line (minimum 11.384 V) written to a pty, read by the PSU "
          f"collector, rule {RULE}, webhook to 127.0.0.1; {machine()}")
    print("| path | median | p99 | max |")
    print("|---|---:|---:|---:|")
    for name, values in (("sag line on the pty -> alarm firing in the agent", to_alarm),
                         ("sag line on the pty -> webhook request at the receiver", to_webhook)):
        print(f"| {name} | {statistics.median(values) * ms:.2f} ms | {percentile(values, 0.99) * ms:.2f} ms | "
              f"{max(values) * ms:.2f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
