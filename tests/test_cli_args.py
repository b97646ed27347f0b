"""Numbers and ports on the command line: a bad one is a one-line usage error (exit 2), never a traceback."""

from __future__ import annotations

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
    (["sim", "--nodes", "0"], "argument --nodes: must be at least 1, got 0"),
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
    assert build_parser().parse_args(["sim"]).base_port == 9871
    assert build_parser().parse_args(["check", "--wait", "1e-1"]).wait == 0.1


def test_sim_nodes_past_the_last_port_are_refused_before_the_rig_starts() -> None:
    done = subprocess.run([sys.executable, "-m", "rigmon", "sim", "--base-port", "65535", "--nodes", "2"],
                          capture_output=True, text=True, timeout=30, env=ENV, cwd=REPO)
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("rigmon: --base-port 65535: 2 nodes would listen up to port 65536, past 65535; "
                           "give a lower one, or 0 for free ports\n")
