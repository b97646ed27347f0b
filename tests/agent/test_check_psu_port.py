"""``rigmon check`` with a ``psu.port`` that is no serial device says what the agent's collector says
(`tests.collectors.test_psu_not_tty`), not "Inappropriate ioctl for device"."""

from __future__ import annotations

from pathlib import Path

from rigmon.agent.check import run_check
from rigmon.agent.check_format import format_report
from rigmon.clock import SystemClock
from rigmon.collectors.psu import PsuCollector
from rigmon.config import AgentConfig, AgentSection, PsuSection
from rigmon.hw.root import HostRoot

PORT = "/dev/ttyUSB0"


def test_a_port_that_is_a_regular_file_is_named_so_in_the_check(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "ttyUSB0").write_text("12.01\n")  # left by `echo ... > /dev/ttyUSB0`
    psu = PsuSection(port=PORT, reopen_min_s=0.05, reopen_max_s=0.2)
    config = AgentConfig(agent=AgentSection(node="n1", root=str(tmp_path)), psu=psu)
    collector = PsuCollector(psu, HostRoot(tmp_path), SystemClock())
    report = run_check(config, SystemClock(), collectors={"psu": collector}, sleep=lambda s: None)
    status = report.collectors["psu"]
    assert status.state == "error" and status.error is not None
    said = (f"cannot open {tmp_path}{PORT}: a regular file, so not a serial device; "
            "set the port to the device's tty (ls /dev/serial/by-id/)")
    assert status.error.endswith(f"psu.port: {said}; retrying"), status.error
    assert "Inappropriate ioctl" not in format_report(report) and said in format_report(report)
