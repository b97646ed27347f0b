"""NVML's watchdog, and `rigmon check`'s wait for a collector, do not call a call hung when the process did
not run for the wait (SIGSTOP, ^Z, a paused VM): `rigmon check` caught across such a stop reported every
GPU hung."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

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
