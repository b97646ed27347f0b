"""``rigmon check``'s text report: wrapped to a terminal's width, one line per item into a pipe."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from rigmon.agent.check import CheckReport
from rigmon.agent.check_format import format_report
from rigmon.cli import _width
from rigmon.schema import Alarm, CollectorStatus

REPO = Path(__file__).resolve().parents[2]
GPU_ERROR = ("NVML: NVML Shared Library Not Found, but 3 NVIDIA GPUs on the PCI bus "
             "(0000:1a:00.0, 0000:1b:00.0, 0000:1c:00.0): is the NVIDIA driver loaded (nvidia-smi)?")
GUARD = "off; it could not act on this node: no NVIDIA driver or GPU (device count: NVML Shared Library Not Found)"


def alarm(rule: str, subject: str, message: str, severity: str = "warning") -> Alarm:
    return Alarm(id=f"check-{rule}", rule=rule, rule_kind="check", severity=severity,  # type: ignore[arg-type]
                 node="node01", subject=subject, state="firing", message=message, started_at=0.0, updated_at=0.0)


def report(*findings: Alarm) -> CheckReport:
    collectors = {"host": CollectorStatus(state="ok", ok=True, duration_s=0.001),
                  "gpu_processes": CollectorStatus(state="error", ok=False, error=GPU_ERROR, duration_s=0.001)}
    return CheckReport(node="node01", root="/", checked_at=0.0, status="critical", exit_code=2,
                       collectors=collectors, findings=findings, guard=GUARD)


MEMBER = alarm("md_member_failed", "disk:nvme1n1",
               "md member nvme1n1 is faulty: the array that holds it has lost it", "critical")
DEGRADED = alarm("md_array_degraded", "md:md127", "array md127 is degraded")
FAILING = alarm("collector_failing", "collector:gpu_processes", "collector gpu_processes is failing")


def test_at_80_columns_every_line_fits_and_continues_under_its_message() -> None:
    text = format_report(report(MEMBER, DEGRADED), width=80)
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert ("  CRITICAL  md_member_failed   disk:nvme1n1  md member nvme1n1 is faulty: the\n"
            "                                             array that holds it has lost it\n"
            "  WARNING   md_array_degraded  md:md127      array md127 is degraded\n") in text
    assert ("  gpu_processes  error   1 ms  NVML: NVML Shared Library Not Found, but 3 NVIDIA\n"
            "                               GPUs on the PCI bus (0000:1a:00.0, 0000:1b:00.0,\n") in text
    assert ("guard: off; it could not act on this node: no NVIDIA driver or GPU (device\n"
            "  count: NVML Shared Library Not Found)\n") in text


def test_a_message_column_too_far_right_puts_every_message_under_its_finding() -> None:
    """The one that fits too: a block keeps one layout."""
    short = alarm("collector_failing", "collector:host", "down")  # fits at 64 columns: below all the same
    text = format_report(report(FAILING, short, alarm("psu_rail_low_warning", "psu", "12 V rail minimum 11.528 V "
                                                                                    "is below 11.7 V")), width=64)
    assert max(len(line) for line in text.splitlines()) <= 64, text
    assert ("  WARNING   collector_failing     collector:gpu_processes\n"
            "      collector gpu_processes is failing\n"
            "  WARNING   collector_failing     collector:host\n"
            "      down\n"
            "  WARNING   psu_rail_low_warning  psu\n"
            "      12 V rail minimum 11.528 V is below 11.7 V\n") in text


@pytest.mark.parametrize("width", [None, 400])
def test_into_a_pipe_or_a_wide_terminal_each_item_is_one_line(width: int | None) -> None:
    text = format_report(report(MEMBER, DEGRADED), width=width)
    assert "  CRITICAL  md_member_failed   disk:nvme1n1  md member nvme1n1 is faulty: the array that holds it " \
           "has lost it\n" in text
    assert f"  gpu_processes  error   1 ms  {GPU_ERROR}\n" in text
    assert f"\nguard: {GUARD}\n" in text
    assert len(text.splitlines()) == 9


def test_the_width_is_the_terminals_only_at_a_terminal() -> None:
    assert _width() is None  # pytest captures standard output
    script = "import sys; from rigmon.cli import _width; sys.stderr.write(repr(_width()))"
    piped = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=30,
                           env={"PYTHONPATH": str(REPO), "COLUMNS": "80"})
    assert piped.stderr == "None"
    leader, follower = pty.openpty()
    try:
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        at_terminal = subprocess.run([sys.executable, "-c", script], stdout=follower, stderr=subprocess.PIPE,
                                     text=True, cwd=REPO, timeout=30, env={"PYTHONPATH": str(REPO)})
    finally:
        os.close(leader)
        os.close(follower)
    assert at_terminal.stderr == "80"
