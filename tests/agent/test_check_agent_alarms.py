"""``rigmon check`` counts the firing alarms of the running agent of its state directory: after
incident 1 (undervolt-bus-drop) the agent had ``gpu_lost``, ``gpu_xid_fatal`` and
``psu_rail_low_critical`` firing, and the check, judging only the newest rail window (a fresh NVML does
not see a GPU gone from the bus, and it reads the kernel log from its newest record), exited 1."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

from msgspec.structs import replace

from rigmon.agent.agent import Agent
from rigmon.agent.check import CheckReport, GuardAccess, run_check
from rigmon.agent.check_alarms import (
    AgentAlarms,
    NoAgent,
    alarms_from_agent,
    with_agent_alarms,
)
from rigmon.agent.check_format import format_report
from rigmon.agent.server import serve
from rigmon.agent.state_lock import Listening, StateLock, listening_agent
from rigmon.clock import SystemClock
from rigmon.config import AgentConfig, AgentSection, AlarmsSection
from rigmon.schema import Alarm
from rigmon.sim.rig import running_rig

#: Real seconds the undervolt scenario at speed 5 is given to lose its GPU (a busy machine is slow).
DEADLINE_S = 60.0
REPO = Path(__file__).resolve().parents[2]
NOW_AT = 1_795_000_000.0


def alarm(rule: str, subject: str, severity: str = "critical", **fields: object) -> Alarm:
    return Alarm(id=f"a{len(rule)}", rule=rule, rule_kind="threshold", severity=severity,  # type: ignore[arg-type]
                 node="node01", subject=subject, state="firing", message=f"{rule} on {subject}",
                 started_at=NOW_AT - 120, updated_at=NOW_AT - 60, fired_at=NOW_AT - 100, **fields)  # type: ignore[arg-type]


async def lost_gpu_firing(config: AgentConfig) -> AgentAlarms:
    """The agent's alarms, asked as the check asks, once ``gpu_lost`` fires."""
    got: AgentAlarms | NoAgent | str = "not asked"
    for _ in range(int(DEADLINE_S / 0.25)):
        got = await asyncio.to_thread(alarms_from_agent, config)
        if isinstance(got, AgentAlarms) and "gpu_lost" in {a.rule for a in got.firing}:
            return got
        await asyncio.sleep(0.25)
    raise AssertionError(f"the agent never had gpu_lost firing: {got}")


def check_beside(config: AgentConfig) -> CheckReport:
    """The check of the node's tree as `rigmon check` runs it, beside its agent."""
    return run_check(config, SystemClock(), pause_s=0.2, guard_probe=GuardAccess,
                     agent_alarms=partial(alarms_from_agent, config))


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "rigmon", "check", "--wait", "0.1", *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=REPO, check=False)


def blind_check_config(tmp_path: Path, config: AgentConfig) -> Path:
    """A configuration of the node's tree whose check reads no GPU, no
    kernel log and no rail: as on the real node after incident 1, where a fresh NVML no longer lists the GPU
    gone from the bus, the Xid 79 is older than the check's first kernel log record, and the rail has
    recovered with the job dead (the simulated NVML still lists the lost GPU, so its collectors are off)."""
    file = tmp_path / "check.toml"
    off = "".join(f"[collectors.{name}]\nenabled = false\n" for name in ("gpu", "gpu_processes", "kernel_log"))
    file.write_text(f'[agent]\nnode = "{config.node_name}"\nroot = "{config.agent.root}"\n{off}')
    return file


async def test_a_gpu_the_agent_lost_fails_the_gate_with_exit_2(tmp_path: Path) -> None:
    async with running_rig("undervolt-bus-drop", 1, base_port=0, speed=5.0, interval_s=0.25) as rig:
        config = rig.agents[0].config
        firing = await lost_gpu_firing(config)
        blind = ("--config", str(blind_check_config(tmp_path, config)), "--state-dir", str(config.agent.state_dir))
        out = await asyncio.to_thread(run_cli, *blind)
        as_json = await asyncio.to_thread(run_cli, *blind, "--json")
        without = await asyncio.to_thread(run_cli, *blind, "--no-agent-alarms")
        report = await asyncio.to_thread(check_beside, config)
    (lost,) = [a for a in firing.firing if a.rule == "gpu_lost"]
    # Before, the check passed the node (exit 0; 1 with a warning of its own): the agent was not asked.
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"agent alarm: {lost.message}, since " in out.stdout
    assert f"note: agent alarms: the running agent at {firing.url} has " in out.stdout
    assert out.stdout.rstrip().endswith(")") and "result: CRITICAL (" in out.stdout
    data = json.loads(as_json.stdout)
    assert as_json.returncode == 2 and data["exit_code"] == 2
    (found,) = [f for f in data["findings"] if f["rule"] == "gpu_lost"]
    assert found["id"] == f"agent-{lost.id}" and found["subject"] == "gpu:3" and found["severity"] == "critical"
    assert without.returncode < 2 and "agent alarm" not in without.stdout, without.stdout
    # The whole check, GPUs and rail read: each rule on a subject once, whoever found it.
    assert (report.status, report.exit_code) == ("critical", 2), format_report(report)
    keys = [(a.rule, a.subject) for a in report.findings]
    assert ("gpu_lost", "gpu:3") in keys and len(keys) == len(set(keys)), keys
    assert any(a.id.startswith("agent-") for a in report.findings)
    text = format_report(report, 80)
    # Every line fits 80 columns but the node's root, a path that is not broken (its length is the test's
    # temporary directory's: longer under pytest-xdist).
    assert "agent alarm: " in text and all(len(line) <= 80 for line in text.splitlines()
                                           if not line.lstrip().startswith("/")), text


def test_a_rule_the_check_found_itself_on_the_same_subject_is_reported_once() -> None:
    own = (alarm("psu_rail_low_critical", "psu"),)
    got = AgentAlarms("http://127.0.0.1:9871", (alarm("psu_rail_low_critical", "psu"), alarm("gpu_lost", "gpu:3"),
                                                alarm("psu_rail_low_critical", "psu2")), pending=1, rules=30)
    findings, note = with_agent_alarms(own, got, NOW_AT)
    assert [(a.id.startswith("agent-"), a.rule, a.subject) for a in findings] == [
        (False, "psu_rail_low_critical", "psu"), (True, "gpu_lost", "gpu:3"), (True, "psu_rail_low_critical", "psu2")]
    assert note == ("agent alarms: the running agent at http://127.0.0.1:9871 has 3 alarms firing, 1 pending "
                    "(not counted: not yet past a rule's hold time)")
    # The agent's more severe alarm of the rule on that subject takes the place of the check's.
    (replaced,) = with_agent_alarms((alarm("x", "psu", "warning"),), AgentAlarms("u", (alarm("x", "psu"),)), NOW_AT)[0]
    assert replaced.severity == "critical" and replaced.id.startswith("agent-")


def test_an_acknowledged_alarm_still_counts_and_says_who_knows_of_it() -> None:
    acked = alarm("gpu_lost", "gpu:3", acknowledged_at=NOW_AT - 30, acknowledged_by="alice")
    (found,), _ = with_agent_alarms((), AgentAlarms("u", (acked,)), NOW_AT)
    assert found.severity == "critical"
    assert found.message == ("agent alarm: gpu_lost on gpu:3, since 11:05:00 UTC, acknowledged by alice at "
                             "11:06:10 UTC")
    # An alarm firing for more than a day says its date.
    old = replace(alarm("gpu_lost", "gpu:3"), fired_at=NOW_AT - 2 * 86400)
    (found,), _ = with_agent_alarms((), AgentAlarms("u", (old,)), NOW_AT)
    assert found.message == "agent alarm: gpu_lost on gpu:3, since 2026-11-16 11:06:40 UTC"


def test_an_agent_that_does_not_answer_leaves_the_check_s_own_findings(tmp_path: Path) -> None:
    state = tmp_path / "state"
    config = AgentConfig(agent=AgentSection(node="n1", root=str(tmp_path), state_dir=str(state)))
    # No recorded agent: nothing asked, and said.
    report = run_check(config, SystemClock(), {}, None, 1, 0.0, guard_probe=GuardAccess,
                       agent_alarms=partial(alarms_from_agent, config))
    assert report.exit_code == 0
    assert report.notes == (f"agent alarms: no running agent recorded in {state}/agent.lock, none read",)
    lock = StateLock(state)
    try:
        lock.record_listening(Listening("http://127.0.0.1:1", "", ""))
        report = run_check(config, SystemClock(), {}, None, 1, 0.0, guard_probe=GuardAccess,
                           agent_alarms=partial(alarms_from_agent, config, 2.0))
    finally:
        lock.release()
    assert (report.status, report.exit_code, report.findings) == ("ok", 0, ())
    (note,) = report.notes
    assert note.startswith("agent alarms not read (the agent at http://127.0.0.1:1 did not answer: ")
    assert note.endswith("): the findings are the check's own")
    assert "agent alarms not read" in format_report(report, 80)


async def test_an_agent_that_watches_for_nothing_is_not_taken_for_a_quiet_one(tmp_path: Path) -> None:
    # Asked with the read token the agent recorded (a refusal would be a note of its own).
    state = tmp_path / "state"
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    token.chmod(0o600)
    section = AgentSection(node="n1", listen="127.0.0.1:0", root=str(tmp_path), state_dir=str(state),
                           token_file=str(token))
    agent = Agent(AgentConfig(agent=section, alarms=AlarmsSection(enabled=False)))
    bound: list[str] = []
    task = asyncio.create_task(serve(agent, "127.0.0.1:0", on_bound=bound.append))
    try:
        for _ in range(600):
            if bound and listening_agent(state) is not None:
                break
            await asyncio.sleep(0.05)
        check = AgentConfig(agent=AgentSection(node="n1", root=str(tmp_path), state_dir=str(state)))
        got = await asyncio.to_thread(alarms_from_agent, check)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert got == AgentAlarms(f"http://{bound[0]}", (), 0, 0)
    assert with_agent_alarms((), got, NOW_AT)[1] == (f"agent alarms: the running agent at http://{bound[0]} has no "
                                                     "alarm firing (it has no alarm rules in force: [alarms] enabled "
                                                     "= false)")
