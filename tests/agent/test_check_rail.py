"""``rigmon check`` beside a running agent that holds the rail ADC's port: a real pty ADC held by a
real agent (pyserial's exclusive lock), and the check asking that agent over a real socket."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

import pytest

from rigmon.agent.agent import Agent, build_collectors
from rigmon.agent.check import CheckReport, GuardAccess, run_check
from rigmon.agent.check_format import format_report
from rigmon.agent.check_rail import rail_from_agent
from rigmon.agent.state_lock import Listening, StateLock
from rigmon.clock import SystemClock
from rigmon.collectors.base import Collector
from rigmon.collectors.psu import PsuCollector
from rigmon.config import AgentConfig, AgentSection, PsuSection
from rigmon.hw.modbus import ModbusPortBusy, ModbusPortError, open_modbus
from rigmon.hw.root import HostRoot
from rigmon.hw.serialport import SerialPortBusy, open_serial
from rigmon.schema import PsuRailReading
from rigmon.sim.psu import DEFAULT_LINK
from rigmon.sim.rig import running_rig
from tests.collectors.psu_helpers import LINK, PtyDevice, Pushed, rm1, wait_for
from tests.collectors.test_psu_pzem import ADDRESS, PzemResponder


def check_config(root: Path, listen: str, node: str = "node01") -> AgentConfig:
    # A state directory of no agent: the check asks ``listen`` (and never reads the machine's default one).
    return AgentConfig(agent=AgentSection(node=node, root=str(root), listen=listen, state_dir=str(root / "no-agent")),
                       psu=PsuSection(port=DEFAULT_LINK))


def psu_only(config: AgentConfig) -> dict[str, Collector]:
    collectors = build_collectors(config, HostRoot(config.agent.root), SystemClock())
    psu = collectors.pop("psu")
    for other in collectors.values():
        other.close()  # the GPU collector's NVML binding has a thread: none is left behind
    return {"psu": psu}


def check(config: AgentConfig) -> CheckReport:
    """The check of the ADC alone, asking the agent of ``config`` as `rigmon check` does."""
    return run_check(config, SystemClock(), psu_only(config), pause_s=0.2, agent_rail=partial(rail_from_agent, config))


async def first_rail_window(agent: Agent) -> None:
    """Wait until ``agent``'s newest frame carries a rail reading with an ADC window in it (on a loaded
    machine its reader may take seconds to open the port and read a window; the bound only stops a hang)."""
    for _ in range(600):
        latest = agent.buffer.latest if agent.buffer is not None else None
        rail = latest.readings.psu_rail if latest is not None else None
        if rail is not None and rail.windows > 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the agent never read a rail window")


async def test_the_check_reads_the_rail_from_the_agent_that_holds_the_port() -> None:
    async with running_rig("healthy-v100", 1, base_port=0, speed=1.0) as rig:
        root = rig.rig.nodes[0].tree.root
        listen = rig.urls[0].removeprefix("http://")
        await first_rail_window(rig.agents[0])  # the agent's reader has the port and its first windows
        with pytest.raises(SerialPortBusy):
            open_serial(str(root / DEFAULT_LINK.lstrip("/")), 115200)
        config = check_config(root, listen)
        report = await asyncio.to_thread(check, config)
        # Without the agent asked, the same check fails the healthy node: the port is busy.
        other = check_config(root, "127.0.0.1:1")
        failed = await asyncio.to_thread(check, other)
        wrong_node = await asyncio.to_thread(rail_from_agent, check_config(root, listen, node="elsewhere"))
    assert report.collectors["psu"].state == "ok", report.collectors["psu"]
    assert report.status == "ok" and report.findings == ()
    assert "running agent holds the rail ADC's port" in format_report(report)
    assert failed.collectors["psu"].state == "error"
    assert "held by another process" in (failed.collectors["psu"].error or "")
    assert "did not answer" in (failed.collectors["psu"].error or "")
    # Where the check looked for the running agent, and how to point it at another state directory.
    assert (f"no running agent recorded its address in {other.agent.state_dir}/agent.lock; for an agent on "
            "another state directory, give it: rigmon check --state-dir DIR)") in (failed.collectors["psu"].error or "")
    assert {a.rule for a in failed.findings} == {"collector_failing"}
    assert isinstance(wrong_node, str) and "is node 'node01', not 'elsewhere'" in wrong_node


def test_a_reading_from_the_agent_is_used_only_when_the_port_is_busy(tmp_path: Path) -> None:
    asked: list[int] = []

    def agent_rail() -> PsuRailReading | str:
        asked.append(1)
        return "not asked"

    config = check_config(tmp_path, "127.0.0.1:1")
    report = run_check(config, SystemClock(), psu_only(config), None, 2, 0.0, agent_rail=agent_rail)
    # No such port at all: an error of its own, and the agent is not asked.
    assert report.collectors["psu"].state == "error" and asked == []


def test_the_check_asks_the_agent_that_holds_a_pzem017_port(tmp_path: Path) -> None:
    # A PZEM-017 on a real pty, polled by the agent's collector (pymodbus opens it with
    # pyserial's exclusive lock): a second open is a typed busy error, and the check's psu
    # collector takes the agent's reading instead of failing the gate.
    device = PtyDevice(tmp_path)
    responder = PzemResponder(device)
    section = PsuSection(port=LINK, protocol="pzem017", baud=9600, poll_interval_s=0.05,
                         reopen_min_s=0.05, reopen_max_s=0.2)
    agent = PsuCollector(section, HostRoot(tmp_path), SystemClock())
    agent.start(Pushed())
    try:
        wait_for(lambda: agent.state.counters.windows_total >= 1)
        with pytest.raises(ModbusPortBusy, match="held by another process"):
            open_modbus(str(device.link), 9600, ADDRESS)
        (held,) = [r for r in agent.collect() if isinstance(r, PsuRailReading)]
        config = AgentConfig(agent=AgentSection(node="node01", root=str(tmp_path)), psu=section)
        checker = PsuCollector(section, HostRoot(tmp_path), SystemClock())
        report = run_check(config, SystemClock(), {"psu": checker}, None, 2, 0.0, agent_rail=lambda: held)
        assert checker.port_busy
        assert report.collectors["psu"].state == "ok", report.collectors["psu"]
        assert "running agent holds the rail ADC's port" in format_report(report)
        assert report.status == "ok" and report.findings == ()
    finally:
        agent.close()
        responder.stop()
        device.close()
    # A port nobody holds that is not there is not busy.
    with pytest.raises(ModbusPortError) as excinfo:
        open_modbus(str(device.link), 9600, ADDRESS)
    assert not isinstance(excinfo.value, ModbusPortBusy)


def test_the_check_never_opens_the_port_of_the_agent_its_state_directory_records(tmp_path: Path) -> None:
    # adc-unplug: the ADC came back, and while the running agent's reader waited out its reopen backoff
    # `rigmon check` opened the free port and read it itself, keeping the agent from the ADC for the
    # whole check (the agent missed those windows; its psu collector failed on).
    device = PtyDevice(tmp_path)
    section = PsuSection(port=LINK, reopen_min_s=0.05, reopen_max_s=0.2)
    agent = PsuCollector(section, HostRoot(tmp_path), SystemClock())
    agent.start(Pushed())
    lock = StateLock(tmp_path / "state")
    try:
        wait_for(lambda: agent.state.connected)
        device.lines(rm1(1), rm1(2), rm1(3))
        wait_for(lambda: agent.state.counters.windows_total >= 1)
        (held,) = [r for r in agent.collect() if isinstance(r, PsuRailReading)]
        agent.close()  # the agent's reader between two opens: the port is free
        lock.record_listening(Listening("http://127.0.0.1:1", "", ""))
        config = AgentConfig(agent=AgentSection(node="node01", root=str(tmp_path), state_dir=str(tmp_path / "state")),
                             psu=section)
        asked: list[int] = []

        def agent_rail() -> PsuRailReading | str:
            asked.append(1)
            return held

        report = run_check(config, SystemClock(), None, None, 2, 0.0, sleep=lambda s: None,
                           guard_probe=GuardAccess, agent_rail=agent_rail)
    finally:
        agent.close()
        lock.release()
        device.close()
    assert report.collectors["psu"].state == "ok", report.collectors["psu"]
    assert asked and "running agent holds the rail ADC's port" in format_report(report)
    # The tree holds the ADC alone: the host collector's failure is the only finding.
    assert [a.subject for a in report.findings] == ["collector:host"]
    # Not answered by the agent, the check says both: it did not open the port, and why the agent gave nothing.
    gone = "the agent at http://127.0.0.1:1 has no rail reading (error: psu.port: no such device (unplugged?))"
    lock = StateLock(tmp_path / "state")
    try:
        lock.record_listening(Listening("http://127.0.0.1:1", "", ""))
        failed = run_check(config, SystemClock(), None, None, 2, 0.0, sleep=lambda s: None,
                           guard_probe=GuardAccess, agent_rail=lambda: gone)
    finally:
        lock.release()
    error = failed.collectors["psu"].error or ""
    assert f"not opened: the running agent recorded in {tmp_path / 'state'}/agent.lock reads the rail ADC" in error
    assert gone in error and [a.subject for a in failed.findings] == ["collector:host", "collector:psu"]


def test_an_adc_whose_every_line_is_dropped_is_said_with_why(tmp_path: Path) -> None:
    """A sketch printing mV without [psu.scale]: a line every 100 ms, each 12030 V, dropped. The check
    said the ADC "sent no reading", which sent the operator to the wiring, not the configuration."""
    device = PtyDevice(tmp_path)
    section = PsuSection(port=LINK, protocol="text", query_identity=False)
    psu = PsuCollector(section, HostRoot(tmp_path), SystemClock())
    config = AgentConfig(agent=AgentSection(node="node01", root=str(tmp_path), state_dir=str(tmp_path / "state")),
                         psu=section)
    try:
        psu.start(Pushed())
        wait_for(lambda: psu.state.connected)
        device.lines(*["12030"] * 6)
        wait_for(lambda: psu.state.counters.nonsense_lines_total >= 5)
        report = run_check(config, SystemClock(), {"psu": psu}, None, 2, 0.0, sleep=lambda s: None,
                           guard_probe=GuardAccess)
    finally:
        psu.close()
        device.close()
    (finding,) = [a for a in report.findings if a.rule == "psu_rail_not_read"]
    lines = psu.state.counters.lines_total
    assert f"sent {lines} lines in " in finding.message and "no reading" in finding.message
    assert f"({lines} out of range: in mV or mA without [psu.scale]?)" in finding.message
