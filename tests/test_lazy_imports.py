"""Commands import what they need when they need it: checked on the modules a fresh interpreter loaded (not timed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: Loaded only when a dashboard user exports, opens a bundle, or an agent is scraped.
EXPORT_AND_REPORT = ("plotext", "textual_plotext", "rigmon.cluster.export", "rigmon.snapshot", "rigmon.agent.journal",
                     "prometheus_client")


def loaded_after(code: str) -> set[str]:
    """Modules loaded by a fresh interpreter after running ``code``."""
    script = f"import sys, json\ntry:\n    {code}\nexcept SystemExit:\n    pass\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def offenders(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes))


@pytest.mark.parametrize("argv", [["--help"], ["dash", "--help"], ["agent", "--help"], ["mark", "--help"]])
def test_help_imports_no_export_collectors_or_dashboard(argv: list[str]) -> None:
    modules = loaded_after(f"from rigmon.cli import main; main({argv!r})")
    # asyncio: the sim and demo commands' (and the agent's), not the parser's; rigmon.setup.command: `setup`'s.
    assert offenders(modules, (*EXPORT_AND_REPORT, "rigmon.collectors", "rigmon.setup.detect", "textual", "pynvml",
                               "rigmon.tui", "asyncio", "rigmon.setup.command", "uvicorn", "starlette")) == []


def test_dashboard_first_screen_code_imports_no_export_or_report() -> None:
    modules = loaded_after("import rigmon.cli_dash, rigmon.tui.app")
    assert "rigmon.tui.app" in modules and "textual.app" in modules
    assert offenders(modules, EXPORT_AND_REPORT) == []


def test_agent_imports_no_prometheus_client_until_scraped() -> None:
    modules = loaded_after("import rigmon.agent.agent, rigmon.agent.server")
    # pymodbus: only a PZEM-017 (Modbus) PSU line opens it; rigmon.summary: the first summary asked for.
    assert offenders(modules, ("prometheus_client", "textual", "plotext", "rigmon.cluster", "rigmon.tui",
                               "rigmon.setup", "rigmon.snapshot", "pymodbus", "rigmon.summary")) == []


def test_agent_command_imports_no_uvicorn_cli_and_no_setup(tmp_path: Path) -> None:
    # Up to the root check, after every import the agent needs: exit 2, nothing served.
    argv = ["agent", "--root", str(tmp_path / "absent"), "--config", "/dev/null", "--state-dir", str(tmp_path / "s")]
    modules = loaded_after(f"from rigmon.cli import main; main({argv!r})")
    assert "rigmon.agent.server" in modules and "uvicorn.server" in modules
    # uvicorn's __init__ imports its command line (click, reloaders); the agent never runs it.
    assert offenders(modules, ("click", "uvicorn.main", "uvicorn.supervisors", "multiprocessing", "rigmon.sim",
                               "textual", "rigmon.tui", "rigmon.cluster")) == []
    # Only the agent's own parser: not the other commands' (dash, sim, mark, setup) nor their modules.
    assert offenders(modules, ("rigmon.setup", "rigmon.cli_dash", "rigmon.cli_sim", "rigmon.cli_mark")) == []


def test_uvicorn_without_its_cli_is_still_the_whole_package_on_first_other_use() -> None:
    code = ("from rigmon.cli_agent import uvicorn_without_its_cli\n"
            "    u = uvicorn_without_its_cli()\n"
            "    import uvicorn, uvicorn.config, uvicorn.server\n"
            "    assert u is uvicorn and uvicorn.Config is uvicorn.config.Config and uvicorn.Server is uvicorn.server.Server\n"
            "    assert 'uvicorn.main' not in sys.modules\n"
            "    from uvicorn import run\n"
            "    assert run is sys.modules['uvicorn.main'].run and uvicorn.__version__\n"
            "    assert uvicorn_without_its_cli() is uvicorn")
    modules = loaded_after(code)
    assert "uvicorn.main" in modules and "click" in modules


def agent_built(tmp_path: Path, toml: str, token: str | None = None) -> set[str]:
    """Modules loaded after building an `Agent` (and its app) from ``toml`` on an empty root."""
    config = tmp_path / "agent.toml"
    config.write_text(toml)
    (tmp_path / "root").mkdir()
    code = ("from rigmon.config import load_agent_config\n"
            "    from rigmon.agent.agent import Agent\n"
            f"    config = load_agent_config({str(config)!r}, {{'root': {str(tmp_path / 'root')!r}, "
            f"'state_dir': {str(tmp_path / 'state')!r}}})\n"
            f"    Agent(config, token={token!r}).app()")
    return loaded_after(code)


#: Only an agent whose [guard] is enabled uses these (NVML control: pynvml's setters; the guard's policy).
GUARD_MODULES = ("rigmon.agent.guard.service", "rigmon.agent.guard.shared", "rigmon.agent.guard.worker",
                 "rigmon.agent.guard.state_store", "rigmon.agent.guard.policy", "rigmon.agent.guard.actuation",
                 "rigmon.agent.guard.collector", "rigmon.hw.nvml_control")


def test_agent_without_guard_or_peers_imports_neither(tmp_path: Path) -> None:
    modules = agent_built(tmp_path, "")
    assert "rigmon.agent.guard.api" in modules  # /v1/guard answers 404 on such an agent
    assert offenders(modules, (*GUARD_MODULES, "rigmon.probes")) == []
    # pyserial: only when a [psu] port is opened.
    assert "rigmon.collectors.psu" in modules and offenders(modules, ("serial",)) == []


def test_agent_with_guard_and_peers_imports_them(tmp_path: Path) -> None:
    toml = '[guard]\nenabled = true\n[[peers]]\nname = "node02"\npaths = [{ name = "tbnet", address = "10.0.0.2" }]\n'
    modules = agent_built(tmp_path, toml, token="t" * 32)
    assert set(GUARD_MODULES) <= modules
    assert {"rigmon.probes.sender", "rigmon.probes.wire"} <= modules


def test_agent_imports_only_the_collectors_it_builds(tmp_path: Path) -> None:
    toml = "".join(f"[collectors.{name}]\nenabled = false\n" for name in ("raid", "psu", "infiniband"))
    modules = agent_built(tmp_path, toml)
    assert {"rigmon.collectors.host", "rigmon.collectors.gpu", "rigmon.collectors.disks"} <= modules
    assert offenders(modules, ("rigmon.collectors.raid", "rigmon.collectors.mdstat", "rigmon.collectors.psu",
                               "rigmon.collectors.psu_lines", "rigmon.collectors.infiniband", "serial")) == []
    (tmp_path / "root").rmdir()
    every = agent_built(tmp_path, "")
    assert {"rigmon.collectors.raid", "rigmon.collectors.psu", "rigmon.collectors.infiniband"} <= every


def test_agent_start_imports_no_importlib_resources(tmp_path: Path) -> None:
    # Without `site` (whose .pth files may import it on a given machine): what rigmon's own start needs.
    import site

    (tmp_path / "root").mkdir()
    code = (f"import sys, json\nsys.path[:0] = [{str(REPO)!r}, *{site.getsitepackages()!r}]\n"
            "from rigmon.config import load_agent_config\nfrom rigmon.agent.agent import Agent\n"
            f"Agent(load_agent_config('/dev/null', {{'root': {str(tmp_path / 'root')!r}}})).app()\n"
            "print(json.dumps(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    modules = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "rigmon.alarms.rules" in modules
    assert offenders(modules, ("importlib.resources", "importlib.readers", "zipfile")) == []
