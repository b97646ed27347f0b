"""``rigmon dash`` with no node on a machine where an agent is installed: it follows that agent."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rigmon import cli_dash
from rigmon.agent.check_rail import AgentToAsk, agent_to_ask
from rigmon.agent.state_lock import LOCK_FILE, Listening, StateLock, listening_agent
from rigmon.cli import main
from rigmon.cli_dash import installed_agent_target
from rigmon.cluster.config import DashConfigError, NodeTarget
from rigmon.config import AgentConfig, AgentSection


def dash_command(argv: list[str]) -> int:
    """``rigmon`` run with ``argv`` (a dash command that exits before its screen), the process's
    logging put back as it was (the command configures it for its log file)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        return main(argv)
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)

def installed(tmp_path: Path, token_mode: int = 0o600, listen: str = "0.0.0.0:9871") -> Path:
    token = tmp_path / "agent.token"
    token.write_text("s3cret\n")
    token.chmod(token_mode)
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\nlisten = "{listen}"\ntoken_file = "{token}"\ntls_cert_file = "{tmp_path}/agent.pem"\n'
                      f'tls_key_file = "{tmp_path}/agent.key"\nstate_dir = "{tmp_path}/state"\n'
                      '[[notify]]\nkind = "webhook"\nurl = "http://127.0.0.1:9/hook"\n')
    return config


def test_no_installed_agent_is_none(tmp_path: Path) -> None:
    assert installed_agent_target(tmp_path / "agent.toml") is None


def test_the_installed_agent_is_followed_at_its_address_with_its_token_and_certificate(tmp_path: Path) -> None:
    target = installed_agent_target(installed(tmp_path), control_token="ctl")
    assert target == NodeTarget("https://127.0.0.1:9871", token="s3cret", control_token="ctl",
                                ca_file=f"{tmp_path}/agent.pem",
                                token_from=f"{tmp_path}/agent.toml: agent.token_file ({tmp_path}/agent.token)")
    target = installed_agent_target(installed(tmp_path, listen="[::]:9900"))
    assert target is not None and target.url == "https://[::1]:9900"


def test_a_token_others_may_read_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DashConfigError, match="readable or writable by other users"):
        installed_agent_target(installed(tmp_path, token_mode=0o644))


def test_dash_without_a_node_does_not_start_a_second_agent_from_the_installed_configuration(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Before, it ran an agent of its own from /etc/rigmon/agent.toml: the node's notifiers twice,
    # the installed agent's state directory and ADC port fought over.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setattr(cli_dash, "INSTALLED_CONFIG", installed(tmp_path, token_mode=0o644))
    started: list[object] = []
    monkeypatch.setattr("rigmon.agent.background.BackgroundAgent.start", lambda self: started.append(self))
    dash_toml = tmp_path / "dash.toml"
    dash_toml.write_text('theme = "rigmon-dark"\n')
    assert dash_command(["dash", "--config", str(dash_toml)]) == 2
    err = capsys.readouterr().err
    assert "this machine's agent" in err and "token_file" in err and "--token-file" in err
    assert started == []


def test_dash_tells_each_node_where_its_token_was_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A 401 of the export then names the option, or the config file and node entry, that gave the token.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    token = tmp_path / "read.token"
    token.write_text("s3cret\n")
    token.chmod(0o600)
    dash_toml = tmp_path / "dash.toml"
    dash_toml.write_text(f'[[nodes]]\nurl = "http://a:1"\ntoken_file = "{token}"\n')
    followed: list[list[NodeTarget]] = []
    monkeypatch.setattr(cli_dash, "run_dashboard", lambda targets, *rest: followed.append(targets) or 0)
    assert dash_command(["dash", "--config", str(dash_toml), "--token-file", str(token), "a:1", "b:2"]) == 0
    a, b = followed[0]
    assert a.token_from == f"{dash_toml}: nodes[0].token_file (node http://a:1)"
    assert b.token_from == f"--token-file {token}"


def no_installed_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No agent installed; the state directory ``rigmon agent`` and ``rigmon check`` take by default is
    ``tmp_path/state`` (not /var/lib/rigmon); the collectors read an empty tree. Returns that directory."""
    state = tmp_path / "state"
    (tmp_path / "root").mkdir()
    monkeypatch.setattr(cli_dash, "INSTALLED_CONFIG", tmp_path / "agent.toml")
    monkeypatch.setattr(cli_dash, "default_state_dir", lambda: state)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setenv("RIGMON_AGENT_ROOT", str(tmp_path / "root"))
    monkeypatch.setenv("RIGMON_AGENT_NODE", "here")
    # The suite's own (conftest) would name another directory than the default.
    monkeypatch.delenv("RIGMON_AGENT_STATE_DIR", raising=False)
    return state


def test_the_dashboard_s_own_agent_records_its_address_where_rigmon_check_finds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before, it kept no state directory and recorded nothing: `rigmon check` on this machine, unable to
    # open the ADC's port the dashboard's agent holds, asked 127.0.0.1:9871, where nothing answered.
    state = no_installed_agent(tmp_path, monkeypatch)
    seen: list[tuple[list[NodeTarget], AgentToAsk]] = []

    def dashboard(targets: list[NodeTarget], *rest: object) -> int:
        # While the screen is up: what `rigmon check` on this machine would ask for the rail.
        seen.append((targets, agent_to_ask(AgentConfig(agent=AgentSection(node="here", state_dir=str(state))))))
        return 0

    monkeypatch.setattr(cli_dash, "run_dashboard", dashboard)
    dash_toml = tmp_path / "dash.toml"
    dash_toml.write_text('theme = "rigmon-dark"\n')
    assert dash_command(["dash", "--config", str(dash_toml)]) == 0
    ((target,), to_ask) = seen[0]
    assert target.url.startswith("http://127.0.0.1:") and to_ask.url == target.url
    assert to_ask.token_origin == f"token file the running agent's (recorded in {state}/{LOCK_FILE})"
    # The dashboard quit: its agent stopped, and the record went with its lock.
    assert listening_agent(state) is None


def test_an_agent_already_serving_on_that_state_directory_is_followed_not_doubled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = no_installed_agent(tmp_path, monkeypatch)
    token = tmp_path / "read.token"
    token.write_text("s3cret\n")
    token.chmod(0o600)
    lock = StateLock(state)  # `rigmon agent` started by hand, serving on 127.0.0.1:9900
    lock.record_listening(Listening("http://127.0.0.1:9900", str(token)))
    started: list[object] = []
    monkeypatch.setattr("rigmon.agent.background.BackgroundAgent.start", lambda self: started.append(self))
    try:
        target, local = cli_dash.local_agent()
    finally:
        lock.release()
    assert local is None and started == []
    assert (target.url, target.token) == ("http://127.0.0.1:9900", "s3cret")
    assert target.token_from == f"the running agent's token file (recorded in {state}/{LOCK_FILE}): {token}"
