"""Helpers shared by the benchmark scripts: process CPU and memory, ports, machine line, a simulated node's physics thread."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Protocol

REPO = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process and all its threads, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def thread_cpu_ms() -> dict[str, float]:
    """User plus system CPU time of each thread of this process, in ms, by thread name.

    Lists the process's threads in ``/proc/self/task`` and names each by the Python thread
    whose ``native_id`` it is. A Python thread's time is read from its own CPU clock
    (``pthread_getcpuclockid``: nanoseconds, where ``/proc/self/task/TID/stat`` counts 10 ms
    ticks, too coarse for a thread using 1 ms a second); a task that is no Python thread (a C
    library's own) is read from its ``stat`` and named ``native:COMM``. Threads sharing a name
    (a pool's workers) are summed. Threads that have exited are not counted: take the
    difference of two calls over a window during which the measured threads live, and
    compare its sum with ``cpu_seconds``.
    """
    threads = {t.native_id: t for t in threading.enumerate() if t.native_id is not None}
    cpu: dict[str, float] = {}
    for task in Path("/proc/self/task").iterdir():
        tid = int(task.name)
        thread = threads.get(tid)
        ms: float | None = None
        name = thread.name if thread is not None else ""
        if thread is not None and thread.ident is not None:
            try:
                ms = 1000 * time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
            except OSError:
                ms = None  # it ended since the listing
        if ms is None:
            try:
                head, tail = (task / "stat").read_text().rsplit(")", 1)
            except (OSError, ValueError):
                continue  # the thread exited between the listing and the read
            fields = tail.split()
            ms = 1000 * (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
            name = name or "native:" + head.split("(", 1)[1]
        cpu[name] = cpu.get(name, 0.0) + ms
    return cpu


def thread_cpu_delta_ms(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU ms per thread name between two ``thread_cpu_ms()`` readings (a thread new since
    ``before`` counts from zero), largest first."""
    delta = {name: ms - before.get(name, 0.0) for name, ms in after.items()}
    return dict(sorted(delta.items(), key=lambda item: -item[1]))


def peak_rss_mb(pid: int) -> float:
    """Peak resident set size of a process (VmHWM) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for pid {pid}")


def self_peak_rss_mb() -> float:
    """Peak RSS of this process in MiB."""
    return peak_rss_mb(os.getpid())


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..1) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def machine() -> str:
    """One line naming the machine: CPU model, cores, Python, kernel."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{model}, {os.cpu_count()} cores; {platform.python_implementation()} {platform.python_version()}; "
            f"Linux {platform.release()}")


def rigmon_env() -> dict[str, str]:
    """Environment for ``python -m rigmon`` subprocesses that run this checkout."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{path}" if path else str(REPO)}


def rigmon_cmd(*args: str) -> list[str]:
    """Command line running this checkout's rigmon with the current interpreter."""
    return [sys.executable, "-m", "rigmon", *args]


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate a process this script started, then kill it if it lingers."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class _Drives(Protocol):
    def drive(self, node: Any, index: int, t_s: float) -> None: ...


class PhysicsThread(threading.Thread):
    """Steps a simulated node (index 0) every ``step_s`` real seconds on a fixed schedule (not a
    pause after each step, so an ADC's 100 ms windows come at 10 a second), each step advancing
    simulated time by exactly ``step_s``, and keeps its own CPU time, so a benchmark running the
    node in its own process can take it out. ``lag_s`` is how far the last step ran behind its
    schedule."""

    def __init__(self, node: Any, scenario: _Drives, clock: Any, step_s: float) -> None:
        super().__init__(name="sim-physics", daemon=True)
        self.node, self.scenario, self.clock, self.step_s = node, scenario, clock, step_s
        self.stopping = threading.Event()
        self.cpu_s = 0.0
        self.steps = 0
        self.lag_s = 0.0

    def run(self) -> None:
        next_at = time.monotonic()
        # Simulated time advances by exactly one step per step, on the schedule, not by the wall
        # clock at the moment the step runs: a step that starts late on a loaded machine would
        # otherwise cover 150 ms, and the ADC would send one 150 ms window for two 100 ms ones
        # (7 of 10 windows a second on a busy machine). Late steps run back to back to catch up.
        t0_s = self.clock.elapsed()
        while True:
            next_at += self.step_s
            if self.stopping.wait(max(0.0, next_at - time.monotonic())):
                return
            t_s = t0_s + (self.steps + 1) * self.step_s
            self.scenario.drive(self.node, 0, t_s)
            self.node.step(t_s)
            self.steps += 1
            self.lag_s = max(0.0, time.monotonic() - next_at)
            self.cpu_s = time.thread_time()
