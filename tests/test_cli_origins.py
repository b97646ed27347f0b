"""An error about a setting's value names it as the operator gave it: the option typed, the environment
variable, or the configuration file's key (``--token-file /x: ...``, not ``token_file /x: ...``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rigmon.cli_dash import installed_agent_target
from rigmon.cluster.config import DashConfigError
from rigmon.config import setting_origin

REPO = Path(__file__).resolve().parents[1]


def test_the_origin_follows_the_precedence_of_option_environment_and_file(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text("")
    env = {"RIGMON_AGENT_TOKEN_FILE": "/x"}
    assert setting_origin("token_file", "--token-file", config, env) == "--token-file"
    assert setting_origin("token_file", None, config, env) == "environment RIGMON_AGENT_TOKEN_FILE"
    assert setting_origin("token_file", None, config, {}) == f"{config}: agent.token_file"
    assert setting_origin("token_file", None, None, {}) in ("agent.token_file",
                                                           "/etc/rigmon/agent.toml: agent.token_file")


def agent(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rigmon", "agent", "--root", str(tmp_path), "--state-dir", str(tmp_path / "s"), *args],
        capture_output=True, text=True, timeout=60,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **(env or {})})


def last_line(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, out.stderr
    return out.stderr.splitlines()[-1]


def test_a_token_file_is_named_by_the_option_typed(tmp_path: Path) -> None:
    missing = tmp_path / "read.token"
    assert last_line(agent(tmp_path, "--token-file", str(missing))) == \
        f"rigmon: --token-file {missing}: No such file or directory"
    assert last_line(agent(tmp_path, "--control-token-file", str(missing))) == \
        f"rigmon: --control-token-file {missing}: No such file or directory"


def test_a_token_file_is_named_by_its_environment_variable_or_its_key(tmp_path: Path) -> None:
    missing = tmp_path / "read.token"
    assert last_line(agent(tmp_path, env={"RIGMON_AGENT_TOKEN_FILE": str(missing)})) == \
        f"rigmon: environment RIGMON_AGENT_TOKEN_FILE {missing}: No such file or directory"
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\ncontrol_token_file = "{missing}"\n')
    assert last_line(agent(tmp_path, "--config", str(config))) == \
        f"rigmon: {config}: agent.control_token_file {missing}: No such file or directory"


def test_one_token_for_both_scopes_names_both_options(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("same\n")
    token.chmod(0o600)
    assert last_line(agent(tmp_path, "--token-file", str(token), "--control-token-file", str(token))).startswith(
        "rigmon: --control-token-file holds the same token as --token-file: every reader could acknowledge alarms")


def test_a_bad_value_given_as_an_option_is_named_by_the_option(tmp_path: Path) -> None:
    assert last_line(agent(tmp_path, "--listen", "nowhere")) == \
        "rigmon: --listen: agent.listen must be HOST:PORT, got 'nowhere'"
    assert last_line(agent(tmp_path / "absent")) == f"rigmon: --root {tmp_path / 'absent'} is not a directory"


def test_the_installed_agent_s_token_file_is_named_by_its_file_and_key(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIGMON_AGENT_TOKEN_FILE", raising=False)
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\ntoken_file = "{tmp_path / "read.token"}"\n')
    with pytest.raises(DashConfigError) as refused:
        installed_agent_target(config)
    assert str(refused.value) == f"{config}: agent.token_file {tmp_path / 'read.token'}: No such file or directory"
