"""``rigmon check``: healthy and broken trees, exit codes, human and JSON output."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rigmon.agent.check import GuardAccess, run_check
from rigmon.agent.check_format import format_report
from rigmon.clock import SystemClock
from rigmon.config import AgentConfig, AgentSection, AlarmsSection
from rigmon.schema import PsuAdcCounters, PsuRailReading, VoltageEnvelope
from rigmon.sim.nvml import machine_from_toml, serving
from rigmon.sim.rig import SimRig, get_scenario

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def healthy_tree(tmp_path: Path) -> Path:
    rig = SimRig(get_scenario("healthy"), 1, tmp_path / "rig")
    rig.step(30.0)
    rig.close()
    return rig.nodes[0].tree.root


def config(root: Path, **alarms: object) -> AgentConfig:
    return AgentConfig(agent=AgentSection(node="n1", root=str(root)), alarms=AlarmsSection(**alarms))  # type: ignore[arg-type]


def check(cfg: AgentConfig):  # type: ignore[no-untyped-def]
    return run_check(cfg, SystemClock(), sleep=lambda s: None)


def test_healthy_tree_passes(healthy_tree: Path) -> None:
    report = check(config(healthy_tree))
    assert (report.status, report.exit_code, report.findings) == ("ok", 0, ())
    assert report.collectors["host"].state == "ok"
    assert "gpu_lost" in report.rules
    n = len(report.collectors)
    assert n >= 1 and all(c.state in ("ok", "absent") for c in report.collectors.values())
    assert format_report(report).endswith(f"result: healthy ({len(report.rules)} rules, {n} collectors)")


def test_missing_proc_stat_is_a_failing_collector(healthy_tree: Path) -> None:
    (healthy_tree / "proc" / "stat").unlink()
    report = check(config(healthy_tree))
    assert (report.status, report.exit_code) == ("warning", 1)
    assert report.collectors["host"].state == "error"
    assert [(a.rule, a.subject) for a in report.findings] == [("collector_failing", "collector:host")]
    text = format_report(report)
    assert "WARNING   collector_failing  collector:host  collector host is failing" in text
    assert "/proc/stat is not readable" in text
    assert text.endswith("result: WARNING (0 critical, 1 warning)")


def test_the_result_counts_warnings_in_the_plural(healthy_tree: Path) -> None:
    (healthy_tree / "proc" / "stat").unlink()
    report = check(config(healthy_tree))
    twice = dataclasses.replace(report, findings=report.findings * 2)
    assert format_report(twice).endswith("result: WARNING (0 critical, 2 warnings)")


def test_critical_finding_exits_2(healthy_tree: Path, tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nname = "uplink_slow"\nkind = "state"\nseverity = "critical"\n'
                     'select = "net[*].speed_mbps"\nexpected = { enp65s0f0 = 200000.0 }\nsubject = "link:{name}"\n')
    report = check(config(healthy_tree, rules_file=str(rules)))
    assert (report.status, report.exit_code) == ("critical", 2)
    assert [(a.rule, a.subject, a.value) for a in report.findings] == [("uplink_slow", "link:enp65s0f0", 100000)]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "rigmon", "check", "--wait", "0.1", *args], check=False,
                          capture_output=True,
                          text=True, timeout=60, env=env, cwd=REPO)


def test_cli_exit_codes_and_json(healthy_tree: Path) -> None:
    ok = run_cli("--root", str(healthy_tree))
    assert ok.returncode == 0, ok.stderr
    assert "result: healthy" in ok.stdout
    (healthy_tree / "proc" / "stat").unlink()
    bad = run_cli("--root", str(healthy_tree), "--json")
    assert bad.returncode == 1, bad.stderr
    report = json.loads(bad.stdout)
    assert report["status"] == "warning" and report["exit_code"] == 1
    assert report["findings"][0]["rule"] == "collector_failing"
    assert report["collectors"]["host"]["state"] == "error"


def test_cli_into_a_pipe_closed_early_keeps_its_exit_code_and_prints_no_traceback(healthy_tree: Path) -> None:
    (healthy_tree / "proc" / "stat").unlink()  # a warning: exit 1
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "rigmon", "check", "--wait", "0.5", "--json", "--root",
                             str(healthy_tree)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=REPO)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # `| head -0`: the reader is gone before the report is printed
    stderr = proc.stderr.read()
    assert proc.wait(60) == 1, stderr
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr


@pytest.mark.parametrize(("args", "says"), [
    (("--wait", "abc"), "rigmon check: error: argument --wait: not a number: 'abc'"),
    (("--wiat", "5"), "error: unrecognized arguments: --wiat 5"),
    (("--root",), "rigmon check: error: argument --root: expected one argument"),
])
def test_cli_bad_arguments_exit_3_not_the_critical_2(args: tuple[str, ...], says: str) -> None:
    """argparse's usage error was exit 2, the gate's "critical findings": a job script reading the code
    took a mistyped option for a critical node. The check could not run: exit 3, as for a bad config."""
    out = run_cli(*args)
    assert out.returncode == 3, out.stderr
    assert says in out.stderr and "Traceback" not in out.stderr


def test_cli_bad_rules_file_is_a_clear_error(tmp_path: Path) -> None:
    cfg = tmp_path / "agent.toml"
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nname = "r"\nkind = "threshold"\nselect = "x.y"\n')
    cfg.write_text(f'[alarms]\nrules_file = "{rules}"\n')
    out = run_cli("--config", str(cfg), "--root", str(tmp_path))
    assert out.returncode == 3
    assert "rule 'r'" in out.stderr and "below or above" in out.stderr


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[collectors.gpuz]\ninterval_s = 1.0\n", "collectors.gpuz: unknown collector (known: host,"),
        ('[alarms]\ndisable = ["psu_rail_low_warnin"]\n', "alarms.disable: no rule named 'psu_rail_low_warnin'"),
        ("[alarms.overrides.psu_rail_low_warnin]\nbelow = 11.6\n",
         "alarms.overrides.psu_rail_low_warnin: no rule of that name"),
        ('[alarms.overrides.psu_rail_low_warning]\nbelow = "x"\n',
         "alarms.overrides.psu_rail_low_warning.below: expected a number"),
        ("[alarms.overrides.gpu_xid_fatal]\ndata = { xid = 79 }\n",
         "alarms.overrides.gpu_xid_fatal.data.xid: expected a list, got 79"),
        ('[alarms.overrides.gpu_lost]\ncollector = "gpus"\n',
         "alarms.overrides.gpu_lost.collector: no collector named 'gpus' (known: "),
        ('[alarms]\ndisable = ["gpu_lost", "gpu_lost"]\n', "alarms.disable: 'gpu_lost' appears twice"),
    ],
)
def test_cli_bad_collector_or_alarms_key_names_the_config_file(tmp_path: Path, text: str, says: str) -> None:
    """Found after loading (by the collector registry, by the rules), these named only the key."""
    cfg = tmp_path / "agent.toml"
    cfg.write_text(text)
    out = run_cli("--config", str(cfg), "--root", str(tmp_path))
    assert out.returncode == 3
    assert out.stderr.startswith(f"rigmon: {cfg}: {says}"), out.stderr


def test_cli_prints_no_terminal_control_from_the_hardware(healthy_tree: Path, tmp_path: Path) -> None:
    # An interface name is whatever the tree says; one carrying a screen clear and an OSC
    # title write must reach the operator's terminal as visible text.
    net = healthy_tree / "sys" / "class" / "net"
    evil = "evil\x1b[2J\x1b]0;pwned\x07"
    shutil.copytree(net / "enp65s0f0", net / evil)
    dev = healthy_tree / "proc" / "net" / "dev"
    line = next(x for x in dev.read_text().splitlines() if "enp65s0f0:" in x)
    with dev.open("a") as f:
        f.write(line.replace("enp65s0f0", evil) + "\n")
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nname = "uplink_slow"\nkind = "state"\nseverity = "critical"\n'
                     'select = "net[*].speed_mbps"\nexpected = { enp65s0f0 = 200000.0 }\nsubject = "link:{name}"\n'
                     '[[rule]]\nname = "any_slow"\nkind = "threshold"\nseverity = "warning"\n'
                     'select = "net[*].speed_mbps"\nbelow = 1e12\nsubject = "link:{name}"\n')
    cfg = tmp_path / "agent.toml"
    cfg.write_text(f'[alarms]\nrules_file = "{rules}"\n')
    out = run_cli("--config", str(cfg), "--root", str(healthy_tree))
    assert out.returncode == 2, out.stderr
    assert "evil\\x1b[2J\\x1b]0;pwned\\x07" in out.stdout
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout

def test_gpus_held_by_a_running_job_are_a_warning(tmp_path: Path) -> None:
    rig = SimRig(get_scenario("healthy-v100"), 1, tmp_path / "rig")
    try:
        rig.step(30.0)  # the DDP job started at 10 s and filled its GPUs' memory
        report = check(config(rig.nodes[0].tree.root))
    finally:
        rig.close()
    busy = [a for a in report.findings if a.rule == "gpu_busy"]
    assert [a.subject for a in busy] == ["gpu:0", "gpu:1", "gpu:2", "gpu:3"]
    assert all(a.severity == "warning" for a in busy) and report.exit_code >= 1
    assert busy[0].message.startswith("GPU 0 is busy: 1 process holds 13.9 GiB: python3 train.py (pid 4242, bob)")
    assert "WARNING   gpu_busy" in format_report(report)


def test_idle_gpus_are_not_busy(tmp_path: Path) -> None:
    rig = SimRig(get_scenario("healthy-v100"), 1, tmp_path / "rig")
    try:
        rig.step(5.0)  # before the job starts
        report = check(config(rig.nodes[0].tree.root))
    finally:
        rig.close()
    assert report.collectors["gpu_processes"].state == "ok"
    assert [a for a in report.findings if a.rule == "gpu_busy"] == []


def test_check_reports_whether_the_guard_could_act(healthy_tree: Path) -> None:
    from rigmon.config import GuardSection
    from rigmon.sim.nvml import FakeNvmlMachine, serving, v100_sxm2_gpus

    machine = FakeNvmlMachine(v100_sxm2_gpus(2))
    with serving(healthy_tree, machine):
        report = check(config(healthy_tree))
        assert report.guard == "off; it could act on this node (NVML accepts clock changes)"
        assert "guard: off; it could act" in format_report(report)
        machine.no_permission = True
        cfg = AgentConfig(agent=AgentSection(node="n1", root=str(healthy_tree)),
                          guard=GuardSection(enabled=True, mode="enforce"))
        report = check(cfg)
        assert report.guard is not None and report.guard.startswith("enforce; it could not act on this node")
        assert "no permission" in report.guard and "root" in report.guard
    assert [g.app_clock_graphics_mhz for g in machine.gpus] == [1312, 1312]  # the probe changed nothing


class LateRail:
    """A rail ADC as the check's psu collector sees it: open, but its first windows come only
    after ``stale_collects`` collects (the reader drops the partial first line and asks the
    device who it is; a 1 s window arrives a second or two after the open)."""

    name = "psu"

    def __init__(self, stale_collects: int, min_volts: float = 11.42) -> None:
        self.left = stale_collects
        self.min_volts = min_volts
        self.collects = 0

    def start(self, push: object) -> None:
        pass

    def close(self) -> None:
        pass

    def collect(self) -> list[object]:
        self.collects += 1
        stale = self.left > 0
        self.left -= 1
        volts = None if stale else VoltageEnvelope(mean_volts=11.8, min_volts=self.min_volts, max_volts=12.0)
        return [PsuRailReading(port="/dev/rigmon-psu0", protocol="rm1", connected=True, stale=stale,
                               envelope_source="device", windows=0 if stale else 1, volts=volts, amps=None,
                               channels_volts={} if volts is None else {"v": volts}, channels_amps={},
                               samples=None, window_s=None, flags=0, under_voltage_latched=False, sag=False,
                               seq=None, device_id=None, firmware=None, sensor=None, last_window_at=None,
                               counters=PsuAdcCounters())]


def test_the_check_waits_for_the_rail_adc_first_window() -> None:
    """Two passes a second apart ended before the ADC's first window: the check passed a rail
    it never read. It waits (a few seconds at most) for a window, so a sag is found."""
    rail = LateRail(stale_collects=3)
    report = run_check(AgentConfig(agent=AgentSection(node="n1")), SystemClock(), collectors={"psu": rail},
                       sleep=lambda s: None)
    assert (report.status, report.exit_code) == ("critical", 2)
    assert {a.rule for a in report.findings} == {"psu_rail_low_warning", "psu_rail_low_critical"}


def test_a_rail_adc_that_sends_nothing_is_a_finding_not_a_pass() -> None:
    rail = LateRail(stale_collects=1000)
    report = run_check(AgentConfig(agent=AgentSection(node="n1")), SystemClock(), collectors={"psu": rail},
                       sleep=lambda s: None)
    assert (report.status, report.exit_code) == ("warning", 1)
    assert [(a.rule, a.subject) for a in report.findings] == [("psu_rail_not_read", "psu")]
    assert "the 12 V rail was not checked" in report.findings[0].message
    assert "/dev/rigmon-psu0" in report.findings[0].message
    assert rail.collects < 20  # bounded: the wait has an end


def test_a_rail_read_at_once_costs_no_wait() -> None:
    rail = LateRail(stale_collects=0, min_volts=11.95)
    report = run_check(AgentConfig(agent=AgentSection(node="n1")), SystemClock(), collectors={"psu": rail},
                       sleep=lambda s: None)
    assert (report.status, rail.collects) == ("ok", 2)


def test_a_gpu_link_trained_narrower_than_it_can_is_a_finding() -> None:
    """Incident 4: a loosely seated SXM2 module trains its PCIe link at x8 of x16. The gate says
    so before the job, when the counters that rise under load are still quiet."""
    folder = REPO / "tests" / "fixtures" / "hosts" / "sxm2-pcie-x8-nvlink-errors"
    machine = machine_from_toml(tomllib.loads((folder / "nvml.toml").read_text()))
    with serving(folder, machine):
        report = run_check(config(folder), SystemClock(), sleep=lambda s: None, guard_probe=GuardAccess)
    assert report.collectors["gpu"].state == "ok"
    gpus = [a for a in report.findings if a.subject.startswith("gpu:")]
    assert [(a.rule, a.subject, a.severity) for a in gpus] == [("gpu_pcie_narrow", "gpu:2", "warning")]
    assert gpus[0].message == "GPU 2 (0000:1c:00.0) PCIe link at x8 of x16: re-seat it (SXM2 torque, riser)"
    assert gpus[0].value == 8


def test_an_nvme_whose_link_is_lost_is_critical(tmp_path: Path) -> None:
    """A drive that fell off the bus while the kernel still lists it (its link reads Unknown)
    was an event only: the check said healthy and exited 0."""
    root = tmp_path / "host"
    shutil.copytree(REPO / "tests" / "fixtures" / "hosts" / "nvme-old-kernel-link-lost", root)
    (root / "proc" / "stat").write_text("cpu  100 0 100 1000 0 0 0 0 0 0\ncpu0 100 0 100 1000 0 0 0 0 0 0\n")
    report = check(config(root))
    assert report.collectors["nvme"].state == "ok"
    lost = [(a.rule, a.severity) for a in report.findings if a.rule == "nvme_link_lost"]
    assert lost == [("nvme_link_lost", "critical")], report.findings
    assert report.exit_code == 2


def test_an_amd_gpu_held_by_a_job_is_named_by_its_pci_address_and_card(tmp_path: Path) -> None:
    # The subject follows the GPU across a reboot that renumbers the DRM cards (as its process
    # events' amd_gpu:<PCI address>); the message names the card the operator looks up in sysfs.
    rig = SimRig(get_scenario("strix-cluster"), 1, tmp_path / "rig")
    try:
        rig.step(30.0)
        report = check(config(rig.nodes[0].tree.root))
    finally:
        rig.close()
    busy = [a for a in report.findings if a.rule == "gpu_busy"]
    assert [a.subject for a in busy] == ["amd_gpu:0000:c3:00.0"]
    assert busy[0].message.startswith("AMD GPU card0 (0000:c3:00.0) is busy: 1 process holds ")
