"""NVML's watchdog, and `rigmon check`'s wait for a collector, do not call a call hung when the process did
not run for the wait (SIGSTOP, ^Z, a paused VM): `rigmon check` caught across such a stop reported every
GPU hung. The stopwatch that times the first ``nvmlInit`` does not count such a stop either."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rigmon.hw.nvml.watchdog import WAIT_SLACK_S, WAIT_SLICE_S, RunningStopwatch

REPO = Path(__file__).resolve().parents[2]

#: The watchdog's timeout.
TIMEOUT_S = 2.0
#: The call returns this long after the process runs again: well within what the stop left of the
#: timeout (only the stop's first slice of the wait counts), well after a wait that counted the stop ended.
RESUMED_S = 0.3
#: How long the process stays stopped: past the timeout.
STOPPED_S = 3.0

CALL = """
import sys

def call():
    print("calling", flush=True)  # the stop comes once the call has begun, while it is waited for
    sys.stdin.buffer.read(1)  # sent just after the process runs again
    return "answered"
"""

WATCHDOG = CALL + f"""
from rigmon.hw.nvml import NvmlHung, Watchdog

watchdog = Watchdog("stall-test", None)
try:
    print(watchdog.run(call, {TIMEOUT_S}), flush=True)
except NvmlHung as exc:
    print("hung:", exc, flush=True)
"""

CHECK = CALL + f"""
from rigmon.agent.check import _collect

class Waiting:
    name = "spinning"

    def collect(self):
        return [call()]

status, records = _collect(Waiting(), {TIMEOUT_S})
print(status.state, *records, flush=True)
"""


@pytest.mark.parametrize(("child", "answer"), [(WATCHDOG, "answered"), (CHECK, "ok answered")],
                         ids=["watchdog", "check"])
def test_a_call_through_a_stop_of_the_process_is_not_hung(child: str, answer: str) -> None:
    process = subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "calling\n"
        process.send_signal(signal.SIGSTOP)
        time.sleep(STOPPED_S)
        process.send_signal(signal.SIGCONT)
        time.sleep(RESUMED_S)
        out, _ = process.communicate("x", timeout=30)
    finally:
        process.send_signal(signal.SIGCONT)
        process.kill()
        process.wait(10)
    assert out == f"{answer}\n"


class SteppedClock:
    """Monotonic seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def test_the_running_stopwatch_counts_running_time_and_a_stop_as_one_slice_at_most() -> None:
    clock = SteppedClock()
    stopwatch = RunningStopwatch("test", clock)  # not started: the test looks in its place
    for _ in range(4):
        clock.now_s += WAIT_SLICE_S
        stopwatch.look()
    assert stopwatch.elapsed() == pytest.approx(4 * WAIT_SLICE_S)
    clock.now_s += 3600.0  # the process was stopped for an hour between two looks
    assert stopwatch.elapsed() == pytest.approx(5 * WAIT_SLICE_S + WAIT_SLACK_S)  # before the look that sees it
    stopwatch.look()
    clock.now_s += WAIT_SLICE_S
    stopwatch.look()
    assert stopwatch.elapsed() == pytest.approx(6 * WAIT_SLICE_S + WAIT_SLACK_S)


def test_stopwatches_share_one_thread() -> None:
    """On a rig without the driver ``nvmlInit`` fails at once and is tried again every poll, each
    try timed by a stopwatch: one thread a try was a thread started and ended every poll."""
    before = {thread.ident for thread in threading.enumerate()}
    clocks = [LookedAt() for _ in range(5)]
    stopwatches = [RunningStopwatch(f"test-{n}", clock).start() for n, clock in enumerate(clocks)]
    try:
        started = [thread.name for thread in threading.enumerate() if thread.ident not in before]
        assert len(started) <= 1  # the process's stopwatch thread, unless an earlier one started it
        assert set(started) <= {"rigmon-stopwatch-clock"}
        # It looks at every one of them.
        deadline = time.monotonic() + 30.0
        while min(clock.looks for clock in clocks) < 2 and time.monotonic() < deadline:
            time.sleep(WAIT_SLICE_S)
        assert min(clock.looks for clock in clocks) >= 2
    finally:
        for stopwatch in stopwatches:
            stopwatch.stop()


class LookedAt:
    """The monotonic clock, counting how often it is looked at."""

    def __init__(self) -> None:
        self.looks = 0

    def __call__(self) -> float:
        self.looks += 1
        return time.monotonic()
