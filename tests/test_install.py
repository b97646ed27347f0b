"""rigmon installs like a tool: a wheel built from the checkout carries its data files and runs from a
clean virtual environment, on the oldest supported Python and the newest this machine has."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rigmon import __version__
from rigmon.sim import write_tree

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

#: Files the package reads at run time that are not Python modules; a wheel without them breaks
#: the dashboard (themes, tcss), the rules, the API description or `rigmon setup agent`.
DATA_FILES = [
    "rigmon/themes/rigmon-dark.toml",
    "rigmon/themes/rigmon-light.toml",
    "rigmon/themes/rigmon-high-contrast.toml",
    "rigmon/tui/rigmon.tcss",
    "rigmon/alarms/default_rules.toml",
    "rigmon/agent/openapi.json",
    "rigmon/setup/deploy/systemd/rigmon-agent.service",
    "rigmon/setup/deploy/udev/99-rigmon-adc.rules",
    "rigmon/py.typed",
]
#: Markers of pip failing to reach an index, as opposed to failing to install.
OFFLINE = ("Could not find a version that satisfies", "No matching distribution", "NewConnectionError",
           "Temporary failure in name resolution", "Network is unreachable")


def interpreters() -> list[tuple[str, str]]:
    """This Python (3.11, the oldest supported) and the newest 3.x pyenv or PATH offers beyond it."""
    found = {f"{sys.version_info.major}.{sys.version_info.minor}": sys.executable}
    candidates = sorted(Path("/root/.pyenv/versions").glob("3.*/bin/python3")) if Path("/root/.pyenv").is_dir() else []
    for minor in range(12, 20):
        on_path = shutil.which(f"python3.{minor}")
        if on_path:
            candidates.append(Path(on_path))
    newest: tuple[tuple[int, int], str] | None = None
    for path in candidates:
        out = subprocess.run([str(path), "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
                             text=True, timeout=30)
        if out.returncode != 0:
            continue
        major, minor = map(int, out.stdout.split())
        if (major, minor) > (sys.version_info.major, sys.version_info.minor) and (newest is None or
                                                                                   (major, minor) > newest[0]):
            newest = ((major, minor), str(path))
    if newest is not None:
        found[f"{newest[0][0]}.{newest[0][1]}"] = newest[1]
    return sorted(found.items())


def clean_env(tmp: Path) -> dict[str, str]:
    """No PYTHONPATH (the checkout must not leak in); pip's cache where the machine keeps it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_"))}
    from tests.conftest import REAL_ENV

    real_home = REAL_ENV.get("HOME")
    if real_home:
        env["PIP_CACHE_DIR"] = str(Path(REAL_ENV.get("XDG_CACHE_HOME") or Path(real_home) / ".cache") / "pip")
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A wheel built from a copy of the checkout (building in place would leave build/ behind)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(REPO, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".mypy_cache", ".hypothesis",
        "tests", "benchmarks", "firmware"))
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "dist"), str(src)],
                         capture_output=True, text=True, timeout=600, env=clean_env(tmp))
    if out.returncode != 0 and any(m in out.stderr for m in OFFLINE):
        pytest.skip(f"cannot fetch the build backend (setuptools) from any index: {out.stderr[-300:]}")
    assert out.returncode == 0, out.stderr
    (built,) = (tmp / "dist").glob("rigmon-*.whl")
    yield built


def test_the_wheel_carries_the_data_files(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [f for f in DATA_FILES if f not in names] == []
    # Every module of the package is in it (a subpackage without __init__.py would be left out).
    modules = {str(p.relative_to(REPO)) for p in (REPO / "rigmon").rglob("*.py")}
    assert modules - names == set()


PYTHONS = interpreters()


@pytest.mark.parametrize(("version", "python"), PYTHONS, ids=[f"python{v}" for v, _ in PYTHONS])
def test_the_wheel_runs_from_a_clean_venv(wheel: Path, version: str, python: str, tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=120, env=env)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                         capture_output=True, text=True, timeout=900, env=env)
    if pip.returncode != 0 and any(m in pip.stderr for m in OFFLINE):
        pytest.skip(f"the dependencies cannot be fetched (no index reachable): {pip.stderr[-300:]}")
    assert pip.returncode == 0, pip.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    rigmon = str(venv / "bin" / "rigmon")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, capture_output=True, text=True, timeout=120, env=env, cwd=elsewhere)

    version = run(rigmon, "--version")
    assert version.returncode == 0 and version.stdout.strip() == f"rigmon {__version__}", version.stderr
    where = run(str(venv / "bin" / "python"), "-c", "import rigmon; print(rigmon.__file__)")
    assert where.stdout.startswith(str(venv)), where.stdout
    node = write_tree(tmp_path / "node", {"/proc/stat": "cpu  1 0 1 10 0 0 0 0 0 0\ncpu0 1 0 1 10 0 0 0 0 0 0\n"}).root
    check = run(rigmon, "check", "--json", "--wait", "0.1", "--root", str(node), "--node", "wheel")
    assert check.returncode in (0, 1, 2), check.stderr
    report = json.loads(check.stdout)
    assert report["node"] == "wheel" and "psu_rail_low_critical" in report["rules"]  # rules TOML from the wheel
    themes = run(str(venv / "bin" / "python"), "-c",
                 "from rigmon.tui.themes import builtin_theme_dir, load_themes; "
                 "t = load_themes(builtin_theme_dir()); print(sorted(x.name for x in t.themes), t.failed)")
    assert themes.stdout.strip() == "['rigmon-dark', 'rigmon-high-contrast', 'rigmon-light'] ()", themes.stderr
    setup = run(rigmon, "setup", "agent", "--dry-run", "--root", str(tmp_path), "--hw-root", str(node))
    assert setup.returncode == 0, setup.stderr
    assert f"ExecStart={venv}/bin/rigmon agent --config /etc/rigmon/agent.toml" in setup.stdout
