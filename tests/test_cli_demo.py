"""`rigmon demo`'s command line: the simulator it starts and what its help promises."""

from __future__ import annotations

import io
import subprocess
from collections.abc import Sequence

import pytest

import rigmon.cli
from rigmon.cli import main


class SimulatorThatPrintsNothing:
    """Stands for the ``rigmon sim`` child: records its command line, exits without a URL."""

    commands: list[list[str]] = []

    def __init__(self, command: Sequence[str], **_: object) -> None:
        self.commands.append(list(command))
        self.stdout = io.StringIO("")

    def terminate(self) -> None:
        pass

    def wait(self, timeout: float | None = None) -> int:
        return 0


def simulator_command(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, list[str]]:
    """Run ``rigmon demo ARGS`` up to starting its simulator; the exit code and the simulator's command line."""
    SimulatorThatPrintsNothing.commands = []
    monkeypatch.setattr(subprocess, "Popen", SimulatorThatPrintsNothing)
    # The root logger keeps its handlers: none of this test's should outlive it.
    monkeypatch.setattr(rigmon.cli, "setup_logging", lambda args, log_file=None: None)
    code = main(["demo", *args])
    (command,) = SimulatorThatPrintsNothing.commands
    return code, command


@pytest.mark.parametrize(("args", "nodes"), [((), "4"), (("--scenario", "undervolt-bus-drop"), "1"),
                                             (("--scenario", "strix-usb4"), "2"),
                                             (("--scenario", "undervolt-bus-drop", "--nodes", "3"), "3")])
def test_demo_runs_the_scenarios_own_number_of_nodes_unless_told(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  args: tuple[str, ...], nodes: str) -> None:
    """`--nodes`' help says "default: the scenario's", as `rigmon sim` does it; the demo ran four nodes
    of any scenario (four copies of the one-node undervolt incident, each notifier firing four times)."""
    code, command = simulator_command(monkeypatch, *args)
    assert command[command.index("--nodes") + 1] == nodes
    # The fake simulator printed no URL: the demo says so and exits 2, as its help says.
    assert code == 2 and "simulated rig did not start" in capsys.readouterr().err


def test_demo_help_states_the_demos_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    """It showed the dashboard's ("bad configuration, token file or bundle"): the demo takes neither."""
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "exit codes: 0 quit; 2 a bad scenario, --agent-config or log file, or the simulated rig did not start" in out
    assert "token file or bundle" not in out
    assert "simulated seconds per real second (default 1)" in out


@pytest.mark.parametrize("command", ["sim", "demo"])
def test_list_names_every_scenario_with_its_nodes_and_starts_nothing(monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str],
                                                                       command: str) -> None:
    """The scenarios were listed only in README and in the error for an unknown name."""
    from rigmon.sim.scenarios import SCENARIOS

    monkeypatch.setattr(subprocess, "Popen", SimulatorThatPrintsNothing)
    SimulatorThatPrintsNothing.commands = []
    assert main([command, "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == sorted(SCENARIOS)
    assert "lab" in [line.split()[0] for line in lines]
    lab = next(line for line in lines if line.startswith("lab "))
    assert "4 nodes" in lab and " ".join(SCENARIOS["lab"].description.split()) in lab
    assert SimulatorThatPrintsNothing.commands == []
