"""The shipped Prometheus files pass the real promtool."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool")

pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (.ci/run installs prometheus)")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, cwd=DEPLOY, timeout=60)


def test_rules_check() -> None:
    out = promtool("check", "rules", "rigmon-rules.yml")
    assert out.returncode == 0, out.stdout + out.stderr


def test_rules_unit_tests() -> None:
    out = promtool("test", "rules", "rigmon-rules.test.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_example_config_check() -> None:
    # The example names a credentials file that only exists on a real Prometheus host.
    out = promtool("check", "config", "--syntax-only", "prometheus.yml")
    assert out.returncode == 0, out.stdout + out.stderr
