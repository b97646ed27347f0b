"""``rigmon check``'s guard line: whether the guard could act here (all of it or application clocks only), and
caps it has in force."""

from __future__ import annotations

from pathlib import Path

from rigmon.agent.check import GuardAccess, _nvml_guard_probe, guard_line
from rigmon.agent.guard.state_file import SavedSettings, state_file_path, write_state
from rigmon.config import AgentConfig, AgentSection, GuardSection
from rigmon.schema import GuardGpuSettings
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


def test_the_probe_answers_how_far_the_guard_could_go_as_a_typed_result(tmp_path: Path,
                                                                       machine: FakeNvmlMachine) -> None:
    """Not a string with a prefix: a reason NVML words like that prefix is no "application clocks only"."""
    with serving(tmp_path / "root", machine):
        cfg = config(tmp_path / "root")
        assert _nvml_guard_probe(cfg)() == GuardAccess("every_step")
        machine.no_permission = machine.app_clocks_unrestricted = True
        access = _nvml_guard_probe(cfg)()
        assert access.reach == "app_clocks_only" and access.why is not None
        assert access.why.startswith("GPU 0: ") and "NVML_ERROR_NO_PERMISSION" in access.why
        machine.app_clocks_unrestricted = False
        assert _nvml_guard_probe(cfg)().reach == "none"
    odd = GuardAccess("none", "application clocks only: a driver's own words")
    assert guard_line(cfg, odd) == ("enforce; it could not act on this node: "
                                    "application clocks only: a driver's own words")


def test_no_permission_at_all(tmp_path: Path, machine: FakeNvmlMachine) -> None:
    machine.no_permission = True
    assert line(tmp_path, machine).startswith("enforce; it could not act on this node: GPU 0: set application clocks")


def test_caps_a_guard_left_in_force_are_said(tmp_path: Path) -> None:
    """An agent killed while engaged (or one engaged now): the GPUs run capped, and the check says so."""
    state = tmp_path / "state"
    write_state(state_file_path(state), SavedSettings(
        step=1, gpus=(0, 1), original=(GuardGpuSettings(0, 877, 1312), GuardGpuSettings(1, 877, 1312)),
        in_force=(GuardGpuSettings(0, 877, 1005), GuardGpuSettings(1, 877, 1005)), original_persistence={}))
    cfg = AgentConfig(agent=AgentSection(node="n", root=str(tmp_path), state_dir=str(state)))
    text = guard_line(cfg, GuardAccess())
    assert text.startswith(f"off; caps in force on GPUs 0,1 ({state_file_path(state)}): gpu0 877/1005 MHz; "
                           "gpu1 877/1005 MHz, originals gpu0 877/1312 MHz; gpu1 877/1312 MHz")
    state_file_path(state).write_text("{")
    assert "cannot be read" in guard_line(cfg, GuardAccess())


def test_caps_an_operator_held_are_said_to_stay_until_released(tmp_path: Path) -> None:
    # The check said "the agent restores them once the rail is healthy" of caps an operator held (kept until released).
    state = tmp_path / "state"
    write_state(state_file_path(state), SavedSettings(
        step=1, gpus=(0,), original=(GuardGpuSettings(0, 877, 1312),), in_force=(GuardGpuSettings(0, 877, 1005),),
        original_persistence={}, held=True))
    cfg = AgentConfig(agent=AgentSection(node="n", root=str(tmp_path), state_dir=str(state)))
    text = guard_line(cfg, GuardAccess())
    assert "held by an operator: they stay until released" in text and "restores them once" not in text
