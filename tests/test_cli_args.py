"""Numbers and ports on the command line: a bad one is a one-line usage error (exit 2; `rigmon check` exits 3,
see tests/agent/test_check.py), never a traceback."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from rigmon.cli import build_parser
from tests.test_cli import ENV, REPO


@pytest.mark.parametrize(("argv", "error"), [
    (["check", "--wait", "abc"], "argument --wait: not a number: 'abc'"),
    (["check", "--wait", "nan"], "argument --wait: must be a positive number, got nan"),
    (["check", "--wait", "inf"], "argument --wait: must be a positive number, got inf"),
    (["check", "--wait", "0"], "argument --wait: must be a positive number, got 0"),
    (["sim", "--speed", "nan"], "argument --speed: must be a positive number, got nan"),
    (["sim", "--duration=-inf"], "argument --duration: must be a positive number, got -inf"),
    (["demo", "--speed", "fast"], "argument --speed: not a number: 'fast'"),
    (["sim", "--nodes", "x"], "argument --nodes: not a whole number: 'x'"),
    (["sim", "--nodes", "0"], "argument --nodes: must be from 1 to 256, got 0"),
    # Unbounded, `--nodes 100000 --tree-only DIR` wrote ~15 GB of trees.
    (["sim", "--nodes", "257"], "argument --nodes: must be from 1 to 256, got 257"),
    (["demo", "--nodes", "100000"], "argument --nodes: must be from 1 to 256, got 100000"),
    (["sim", "--base-port", "70000"], "argument --base-port: must be a port number from 0 to 65535, got 70000"),
    (["sim", "--base-port", "-5"], "argument --base-port: must be a port number from 0 to 65535, got -5"),
    (["sim", "--base-port", "x"], "argument --base-port: not a port number: 'x'"),
])
def test_a_bad_number_is_a_usage_error_naming_the_option(
        argv: list[str], error: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"rigmon {argv[0]}: error: {error}"


def test_good_numbers_parse() -> None:
    args = build_parser().parse_args(["sim", "--speed", "0.5", "--nodes", "3", "--base-port", "0", "--duration", "2"])
    assert (args.speed, args.nodes, args.base_port, args.duration) == (0.5, 3, 0, 2.0)
    assert build_parser().parse_args(["sim", "--nodes", "256"]).nodes == 256
    assert build_parser().parse_args(["sim"]).base_port == 9871
    assert build_parser().parse_args(["check", "--wait", "1e-1"]).wait == 0.1


def test_sim_nodes_past_the_last_port_are_refused_before_the_rig_starts() -> None:
    done = subprocess.run([sys.executable, "-m", "rigmon", "sim", "--base-port", "65535", "--nodes", "2"],
                          capture_output=True, text=True, timeout=30, env=ENV, cwd=REPO)
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("rigmon: --base-port 65535: 2 nodes would listen up to port 65536, past 65535; "
                           "give a lower one, or 0 for free ports\n")


def _value_options(parser: argparse.ArgumentParser, command: str) -> list[tuple[str, argparse.Action]]:
    """Every option taking a value of ``parser`` and its subcommands, with the command it belongs to."""
    found: list[tuple[str, argparse.Action]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _value_options(sub, f"{command} {name}".strip())
        elif action.option_strings and action.nargs != 0 and not action.required \
                and not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            found.append((command, action))
    return found


def test_every_option_taking_a_value_states_its_default() -> None:
    # `rigmon demo --theme` (and a dozen others) said nothing of what is used without them.
    options = _value_options(build_parser(), "")
    assert len(options) > 40
    silent = [f"rigmon {command} {action.option_strings[-1]}" for command, action in options
              if "default" not in (action.help or "")]
    assert silent == []
