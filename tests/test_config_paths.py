"""Paths in the agent's file: a relative one is refused naming file and key, not taken from where the agent runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.cli import main
from rigmon.config import ConfigError, load_agent_config


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ('[agent]\ntoken_file = "read.token"\n', "agent.token_file", "read.token"),
        ('[agent]\ncontrol_token_file = "control.token"\n', "agent.control_token_file", "control.token"),
        ('[agent]\nstate_dir = "journal"\n', "agent.state_dir", "journal"),
        ('[agent]\nroot = "tree/node01"\n', "agent.root", "tree/node01"),
        ('[agent]\ntls_cert_file = "agent.pem"\ntls_key_file = "/etc/rigmon/agent.key"\n', "agent.tls_cert_file",
         "agent.pem"),
        ('[agent]\ntls_cert_file = "/etc/rigmon/agent.pem"\ntls_key_file = "agent.key"\n', "agent.tls_key_file",
         "agent.key"),
        ('[agent]\ntoken_file = "~/read.token"\n', "agent.token_file", "~/read.token"),  # no shell expands it
        ('[alarms]\nrules_file = "rules.toml"\n', "alarms.rules_file", "rules.toml"),
        ('[probes]\nkey_file = "probe.key"\n', "probes.key_file", "probe.key"),
    ],
)
def test_a_relative_path_in_the_file_is_refused_naming_file_and_key(tmp_path: Path, text: str, key: str,
                                                                     value: str) -> None:
    """The agent ran in the operator's shell's directory by hand and in / under systemd: a
    ``state_dir = "journal"`` put the journal wherever it was started, a ``token_file = "read.token"``
    that worked in a terminal failed the service."""
    path = tmp_path / "agent.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_agent_config(path, environ={})
    assert str(info.value).startswith(f"{path}: {key}: {value!r} is not an absolute path")


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[psu]\nport = "ttyUSB0"\n', "psu.port must be an absolute device path"),
        ('[[notify]]\nkind = "command"\ncommand = ["./notify.sh", "x"]\n',
         "notify[0].command: the program './notify.sh' is a relative path"),
    ],
)
def test_a_relative_device_or_program_is_refused_naming_the_key(tmp_path: Path, text: str, key: str) -> None:
    """``port = "ttyUSB0"`` was opened below the agent's root as ``<root>/ttyUSB0``, a device that never
    exists; ``./notify.sh`` ran from the agent's working directory."""
    path = tmp_path / "agent.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_agent_config(path, environ={})
    assert str(info.value).startswith(f"{path}: {key}")


def test_absolute_paths_a_bare_program_and_relative_flags_are_taken(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(f'[agent]\nstate_dir = "{tmp_path}/state"\n[psu]\nport = "/dev/rigmon-psu0"\n'
                    '[[notify]]\nkind = "command"\ncommand = ["logger", "-t", "rigmon"]\n')
    config = load_agent_config(path, environ={})
    assert config.agent.state_dir == f"{tmp_path}/state" and config.psu.port == "/dev/rigmon-psu0"
    # A flag or variable typed in a shell is relative to that shell's directory, as everywhere.
    config = load_agent_config(path, {"state_dir": "state", "root": "tree"}, environ={"RIGMON_AGENT_TOKEN_FILE": "t"})
    assert (config.agent.state_dir, config.agent.root, config.agent.token_file) == ("state", "tree", "t")


def test_rigmon_agent_with_a_relative_path_in_its_file_exits_2_before_writing_anything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import rigmon.cli_agent

    monkeypatch.chdir(tmp_path)
    # The root logger keeps its handlers: one on this test's captured stderr would outlive it.
    monkeypatch.setattr(rigmon.cli_agent, "setup_logging", lambda args: None)
    path = tmp_path / "agent.toml"
    path.write_text(f'[agent]\nlisten = "127.0.0.1:0"\nroot = "{tmp_path}"\nstate_dir = "journal"\n')
    assert main(["agent", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rigmon: {path}: agent.state_dir: 'journal' is not an absolute path")
    assert err.count("\n") == 1
    assert not (tmp_path / "journal").exists()
