"""The walls between layers (STYLE.md): import-linter contracts, re-checked at run time."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_import_linter_contracts_hold() -> None:
    exe = shutil.which("lint-imports")
    if exe is None:
        pytest.fail("lint-imports is missing: install the test extra (pip install -e '.[test]')")
    out = subprocess.run([exe, "--config", str(REPO / "pyproject.toml")], capture_output=True, text=True, cwd=REPO,
                         timeout=120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


@pytest.mark.parametrize("module", ["rigmon.agent.server", "rigmon.collectors", "rigmon.sim.rig"])
def test_agent_side_never_loads_textual_or_plotext(module: str) -> None:
    code = (
        f"import sys, json, {module}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'plotext', 'rich'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                         check=True)
    assert json.loads(out.stdout) == []


def test_rigmon_passes_mypy_strict(tmp_path: Path) -> None:
    # STYLE.md: `mypy --strict` on rigmon/ (settings in pyproject.toml). A cold cache takes ~10 s.
    out = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "rigmon"],
                         capture_output=True, text=True, cwd=REPO, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "Success: no issues found" in out.stdout
