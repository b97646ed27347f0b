"""The benchmarks' helpers: the simulator thread advances simulated time by one step per step, late or
not; CPU time per thread is found by the thread's name."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.common import PhysicsThread, thread_cpu_delta_ms, thread_cpu_ms  # noqa: E402


class _Clock:
    def elapsed(self) -> float:
        return time.monotonic()


class _Node:
    def __init__(self) -> None:
        self.times: list[float] = []

    def step(self, t_s: float) -> None:
        # Slower than the schedule on some steps, as on a loaded machine.
        self.times.append(t_s)
        if len(self.times) % 3 == 0:
            time.sleep(0.03)


class _Scenario:
    def drive(self, node: object, index: int, t_s: float) -> None:
        pass


def test_late_steps_still_advance_one_step_each() -> None:
    node = _Node()
    thread = PhysicsThread(node, _Scenario(), _Clock(), 0.01)
    thread.start()
    deadline = time.monotonic() + 10
    while len(node.times) < 30 and time.monotonic() < deadline:
        time.sleep(0.01)
    thread.stopping.set()
    thread.join(5)
    steps = [round(b - a, 9) for a, b in zip(node.times, node.times[1:])]
    # Every step covers exactly 10 ms of simulated time (an ADC window each), however late it ran.
    assert len(steps) >= 29 and set(steps) == {0.01}


def test_thread_cpu_is_counted_under_the_threads_name() -> None:
    before = thread_cpu_ms()
    spinning = threading.Event()
    done = threading.Event()

    def spin() -> None:
        # Burn CPU until the kernel has charged at least two clock ticks to this thread.
        t0 = time.thread_time()
        while time.thread_time() - t0 < 0.05:
            pass
        spinning.set()
        done.wait(10)

    thread = threading.Thread(target=spin, name="bench-spinner", daemon=True)
    thread.start()
    assert spinning.wait(30)
    after = thread_cpu_ms()
    done.set()
    thread.join(5)
    delta = thread_cpu_delta_ms(before, after)
    assert "bench-spinner" not in before
    assert delta["bench-spinner"] > 0
    assert threading.current_thread().name in after
    # Largest first.
    assert list(delta.values()) == sorted(delta.values(), reverse=True)


def test_startup_runs_write_byte_code_even_when_the_caller_says_not_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # "Warm" start-up means byte code from the warm-up run: without it every run compiled from source.
    from benchmarks.startup import _env

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = _env(tmp_path)
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["PYTHONPYCACHEPREFIX"].startswith(str(tmp_path))
