"""`rigmon setup agent --strict`: a setup done with warnings exits 3, so a script or an Ansible task tells it
from a clean one (0) and from one whose step failed (1); without the flag it exits 0 and says how many."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rigmon.setup.command import EXIT_WARNINGS, exit_status, install
from rigmon.setup.detect import Hardware
from rigmon.setup.plan import Installer
from rigmon.setup.render import Settings
from tests.setup.helpers import ENV, setup_agent

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
SETTINGS = Settings(node="rig7", listen="0.0.0.0:9871", user="rigmon", groups=(), exec_start=("/usr/bin/rigmon",),
                    tls=True)


def installed(root: Path, asked: list[str]) -> Installer:
    """One `install` below ``root`` asking the certificate for ``asked``, as `rigmon setup agent` runs it."""
    installer = Installer(root)
    install(installer, SETTINGS, Hardware(states={}), ["rig7", "localhost"], asked_names=asked)
    assert not installer.failed, installer.lines
    return installer


@needs_openssl
def test_a_clean_setup_exits_0_and_one_with_a_warning_exits_3_under_strict(tmp_path: Path) -> None:
    clean = installed(tmp_path, ["rig7"])
    assert clean.warnings == 0 and exit_status(clean, strict=True) == 0
    # Run again asking for a name the kept certificate lacks: done, and said in a warning.
    kept = installed(tmp_path, ["rig7", "v100-b.lab"])
    assert kept.warnings == 1
    assert [line for line in kept.lines if line.startswith("warning:")][0].startswith(
        "warning: the kept certificate /etc/rigmon/agent.pem is not valid for v100-b.lab")
    assert exit_status(kept, strict=True) == EXIT_WARNINGS == 3
    assert exit_status(kept, strict=False) == 0
    kept.failed = True
    assert exit_status(kept, strict=True) == 1  # a failed step stays a failure, warnings or not


@needs_openssl
def test_the_command_exits_3_with_strict_when_done_with_warnings(tmp_path: Path) -> None:
    assert setup_agent(tmp_path, "--tls-name", "v100-b").returncode == 0
    lenient = setup_agent(tmp_path, "--tls-name", "v100-b.lab")
    assert lenient.returncode == 0, lenient.stderr
    assert "with --strict it exits 3 for that" in lenient.stderr.splitlines()[-1]
    strict = setup_agent(tmp_path, "--tls-name", "v100-b.lab", "--strict")
    assert strict.returncode == 3, strict.stderr
    warnings = [line for line in strict.stdout.splitlines() if line.startswith("warning:")]
    assert any(line.startswith("warning: the kept certificate") for line in warnings), strict.stdout
    # Every warning is counted: the summary's number is the lines'.
    assert strict.stderr.splitlines()[-1] == (
        f"rigmon: setup agent is done, with {len(warnings)} warning{'s' if len(warnings) > 1 else ''} (the lines "
        "starting with 'warning:'): exit status 3 (--strict)")
    # The rest of the run is the same: the lines to paste are printed.
    assert "rigmon dash https://rig7:9871" in strict.stdout


def test_a_kept_configuration_that_differs_from_the_flags_is_a_warning(tmp_path: Path) -> None:
    assert setup_agent(tmp_path, "--no-tls").returncode == 0
    again = setup_agent(tmp_path, "--no-tls", "--listen", "0.0.0.0:9999", "--strict")
    assert again.returncode == 3, again.stderr
    assert "warning: /etc/rigmon/agent.toml is kept as it is, so the agent serves http on 0.0.0.0:9871" in again.stdout


@needs_openssl
def test_a_dry_run_with_strict_exits_3_for_the_warnings_it_foresees(tmp_path: Path) -> None:
    assert setup_agent(tmp_path, "--tls-name", "v100-b").returncode == 0
    planned = setup_agent(tmp_path, "--tls-name", "v100-b.lab", "--dry-run", "--strict")
    assert planned.returncode == 3, planned.stderr
    assert "warning: the kept certificate /etc/rigmon/agent.pem is not valid for v100-b.lab" in planned.stdout
    assert planned.stderr.splitlines()[-1].startswith("rigmon: setup agent's dry run is done, with ")


def test_a_reader_that_leaves_early_ends_the_output_not_the_setup(tmp_path: Path) -> None:
    # `rigmon setup agent --dry-run | head`: the reader is gone before setup writes; a traceback then exited 1,
    # "a step failed", for a setup whose steps all ran.
    (tmp_path / "no-hardware").mkdir()
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        out = subprocess.run([sys.executable, "-m", "rigmon", "setup", "agent", "--root", str(tmp_path), "--node",
                              "rig7", "--hw-root", str(tmp_path / "no-hardware"), "--no-tls"], stdout=write_end,
                             stderr=subprocess.PIPE, text=True, timeout=120, env=ENV, cwd=tmp_path)
    finally:
        os.close(write_end)
    assert "Traceback" not in out.stderr and "BrokenPipeError" not in out.stderr, out.stderr
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "etc/rigmon/agent.toml").is_file()
