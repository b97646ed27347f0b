"""Shared pytest options and fixtures, and the guard that keeps the suite off the machine's real state.

At start-up (before any test module is imported, so modules that copy ``os.environ`` see it)
the suite moves HOME and the XDG directories to a temporary directory and sets
``RIGMON_AGENT_STATE_DIR`` there, so an agent started without ``--state-dir`` (even as root,
where the default would be /var/lib/rigmon) journals into it. The real default paths are
fingerprinted then and again at the end; any difference fails the run, naming the paths.

The temporary directory (``TMPDIR`` and `tempfile`'s) is moved to one of the session's own too
(`tests.tmp_guard`; pytest's ``tmp_path`` stay where they were): a simulated rig's ``rigmon-sim-*``
directory still there at the end fails the run, naming it and its files.

Hypothesis runs without its wall-clock checks (`HYPOTHESIS_PROFILE`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.state_guard import differences, fingerprint, real_default_paths
from tests.tmp_guard import sim_leftovers

REPO = Path(__file__).resolve().parent.parent
#: The variables the suite redirects that name the user's real directories.
_REAL_VARS = ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")
#: Where a pytest-xdist worker finds them: it starts with the controller's redirected environment.
_KEPT = "RIGMON_TEST_REAL_"
#: The environment's values before the suite redirected them (the wheel test reuses pip's real cache).
REAL_ENV = {k: os.environ.get(_KEPT + k, os.environ.get(k, "")) for k in _REAL_VARS}
REAL_ENV = {k: v for k, v in REAL_ENV.items() if v}

_guard: dict[str, object] = {}

#: Hypothesis's settings for every property here (loaded before any test module is imported, so a
#: test's own ``@settings(max_examples=...)`` keeps them). No property is about time, but hypothesis
#: measures wall time: an example over 200 ms fails its test (``DeadlineExceeded``, then
#: ``FlakyFailure`` when the replay is quick), and slow generation fails the too_slow health check.
#: A loaded machine leaving the process waiting 0.3 s failed a test_psu_lines property so.
HYPOTHESIS_PROFILE = "rigmon"
settings.register_profile(HYPOTHESIS_PROFILE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(HYPOTHESIS_PROFILE)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite golden JSON files instead of comparing")


def pytest_configure(config: pytest.Config) -> None:
    paths = real_default_paths(REAL_ENV, REPO)
    for name, value in REAL_ENV.items():
        os.environ.setdefault(_KEPT + name, value)
    base = Path(tempfile.mkdtemp(prefix="rigmon-test-home-"))
    redirected = {
        "HOME": base / "home",
        "XDG_CONFIG_HOME": base / "home" / ".config",
        "XDG_DATA_HOME": base / "home" / ".local" / "share",
        "XDG_STATE_HOME": base / "home" / ".local" / "state",
        "XDG_CACHE_HOME": base / "home" / ".cache",
        "RIGMON_AGENT_STATE_DIR": base / "agent-state",
    }
    (base / "home").mkdir()
    for name, value in redirected.items():
        os.environ[name] = str(value)
    # pytest's base of tmp_path is its own (kept for a few runs): where it would have been.
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
    # Not below ``base`` (0700): set-up tests need every directory above their files searchable by others.
    tmp = Path(tempfile.mkdtemp(prefix="rigmon-test-tmp-"))
    tmp.chmod(0o755)
    os.environ["TMPDIR"] = tempfile.tempdir = str(tmp)
    _guard.update(base=base, tmp=tmp, paths=paths, before=fingerprint(paths))


def _fail_session(session: pytest.Session, title: str, lines: list[str]) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    text = "\n".join(lines)
    if reporter is not None:
        reporter.write_line("")
        reporter.write_sep("!", title, red=True)
        reporter.write_line(text)
    else:
        print(text)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _guard_findings() -> list[tuple[str, list[str]]]:
    """What this process's guard found at the end: (title, lines) for each failure."""
    paths = _guard.get("paths")
    if not isinstance(paths, list):
        return []
    found: list[tuple[str, list[str]]] = []
    before = _guard["before"]
    assert isinstance(before, dict)
    changed = differences(before, fingerprint(paths))
    if changed:
        found.append(("real state changed", ["the test suite changed the machine's real rigmon state:", *changed]))
    tmp = _guard.get("tmp")
    left = sim_leftovers(tmp) if isinstance(tmp, Path) else []
    if left:
        found.append(("simulated rigs left their directories", [
            ("simulated rigs' temporary directories were left behind (a rig's process killed, or a writer "
             "that outlived its rig and made the directory again):"), *left]))
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    found = _guard_findings()
    worker_output = getattr(session.config, "workeroutput", None)
    if worker_output is not None:
        # A pytest-xdist worker: its exit status does not reach the run's; the controller fails the run
        # with what each worker found (`pytest_testnodedown`).
        worker_output[_WORKER_FINDINGS] = found
        return
    for title, lines in [*found, *_worker_findings]:
        _fail_session(session, title, lines)


#: What the pytest-xdist workers' guards found, gathered by the controller as each worker ends.
_worker_findings: list[tuple[str, list[str]]] = []
_WORKER_FINDINGS = "rigmon_guard_findings"


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist (controller): a worker ended; keep what its guard found."""
    for title, lines in getattr(node, "workeroutput", {}).get(_WORKER_FINDINGS, []):
        _worker_findings.append((f"{title} ({node.gateway.id})", list(lines)))


def pytest_unconfigure(config: pytest.Config) -> None:
    for name in ("base", "tmp"):
        path = _guard.get(name)
        if isinstance(path, Path):
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))

