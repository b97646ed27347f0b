"""``rigmon check``'s guard line: whether the guard could act here, all of it or application clocks only."""

from __future__ import annotations

from pathlib import Path

from rigmon.agent.check import _nvml_guard_probe, guard_line
from rigmon.config import AgentConfig, AgentSection, GuardSection
from rigmon.sim.nvml import FakeNvmlMachine, serving


def config(root: Path) -> AgentConfig:
    return AgentConfig(agent=AgentSection(node="n", root=str(root)), guard=GuardSection(enabled=True, mode="enforce"))


def line(tmp_path: Path, machine: FakeNvmlMachine) -> str:
    with serving(tmp_path / "root", machine):
        cfg = config(tmp_path / "root")
        return guard_line(cfg, _nvml_guard_probe(cfg)())


def test_root_may_take_every_step(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    assert line(tmp_path, machine) == "enforce; it could act on this node (NVML accepts clock changes)"
    assert [g.power_limit_mw for g in machine.gpus] == [300_000] * 4  # asked by writing it back unchanged


def test_application_clocks_only_says_the_later_steps_need_root(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    # nvidia-smi -acp UNRESTRICTED, the check not run as root: step 1 may write, steps 2 and 3 may not.
    machine.no_permission = machine.app_clocks_unrestricted = True
    text = line(tmp_path, machine)
    assert text.startswith("enforce; it could cap application clocks on this node, but not lock clocks or set "
                           "a power limit (they need root): ")
    assert "NVML_ERROR_NO_PERMISSION" in text


def test_no_permission_at_all(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    machine.no_permission = True
    assert line(tmp_path, machine).startswith("enforce; it could not act on this node: GPU 0: set application clocks")
