"""Paths in dash.toml: a relative one is refused naming file, node and key; errors about a node's files name both."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rigmon import cli_dash
from rigmon.cluster.config import (
    DashConfigError,
    NodeTarget,
    load_dash_config,
    resolve_targets,
)
from tests.test_cli_dash import dash_command


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ('[[nodes]]\nurl = "a:1"\n[[nodes]]\nurl = "b:1"\ntoken_file = "rel.token"\n',
         "nodes[1].token_file (node b:1)", "rel.token"),
        ('[[nodes]]\nurl = "a:1"\ncontrol_token_file = "ctl/a.control"\n',
         "nodes[0].control_token_file (node a:1)", "ctl/a.control"),
        ('[[nodes]]\nurl = "https://a:1"\nca_file = "lab-ca.pem"\n', "nodes[0].ca_file (node https://a:1)",
         "lab-ca.pem"),
        ('[[nodes]]\nurl = "a:1"\ntoken_file = "~no-such-user-here/a.token"\n',
         "nodes[0].token_file (node a:1)", "~no-such-user-here/a.token"),
        ('export_dir = "exports"\n', "export_dir", "exports"),
        ('export_dir = "./exports"\n', "export_dir", "./exports"),
    ],
)
def test_a_relative_path_in_the_file_is_refused_naming_file_node_and_key(tmp_path: Path, text: str, key: str,
                                                                         value: str) -> None:
    """A relative path was taken from the directory the dashboard started in: ``token_file = "rel.token"``
    worked in one directory, not in another, and ``export_dir = "exports"`` wrote bundles into the
    checkout the operator stood in (README: "never the current directory")."""
    path = tmp_path / "dash.toml"
    path.write_text(text)
    with pytest.raises(DashConfigError) as info:
        load_dash_config(path)
    assert str(info.value).startswith(f"{path}: {key}: {value!r} is not an absolute path")


def test_absolute_paths_and_paths_under_home_are_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    path = tmp_path / "dash.toml"
    path.write_text(f'export_dir = "~/exports"\n[[nodes]]\nurl = "a:1"\ntoken_file = "~/.config/rigmon/a.token"\n'
                    f'control_token_file = "{tmp_path}/a.control"\nca_file = "~/lab-ca.pem"\n')
    config = load_dash_config(path)
    assert config.export_dir == "~/exports" and config.nodes[0].token_file == "~/.config/rigmon/a.token"


def test_a_node_file_that_cannot_be_read_is_named_with_the_file_and_the_node(tmp_path: Path) -> None:
    """It said ``nodes: token_file /x/rel.token: No such file or directory``: which file, which node?"""
    path = tmp_path / "dash.toml"
    path.write_text(f'[[nodes]]\nurl = "a:1"\n[[nodes]]\nurl = "b:1"\ntoken_file = "{tmp_path}/b.token"\n')
    config = load_dash_config(path)
    with pytest.raises(DashConfigError, match=re.escape(
            f"{path}: nodes[1].token_file (node b:1) {tmp_path}/b.token: No such file or directory")):
        resolve_targets([], config, source=str(path))
    # A command-line URL the file lists takes its token: the error is still about the file's node.
    with pytest.raises(DashConfigError, match=re.escape(f"{path}: nodes[1].token_file (node b:1)")):
        resolve_targets(["http://b:1"], config, source=str(path))
    assert resolve_targets(["a:1"], config, source=str(path)) == [
        NodeTarget("http://a:1", token_where=f"in {path}: nodes[0].token_file (node a:1)")]


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ('control_token_file = "{d}/a.control"', "control_token_file"),
        ('ca_file = "{d}/lab-ca.pem"', "ca_file"),
    ],
)
def test_other_node_files_name_the_file_and_the_node(tmp_path: Path, entry: str, key: str) -> None:
    path = tmp_path / "dash.toml"
    path.write_text(f'[[nodes]]\nurl = "https://a:1"\n{entry.format(d=tmp_path)}\n')
    with pytest.raises(DashConfigError, match=re.escape(f"{path}: nodes[0].{key} (node https://a:1) {tmp_path}/")):
        resolve_targets([], load_dash_config(path), source=str(path))


def test_a_bad_url_of_the_file_names_the_file_and_the_node(tmp_path: Path) -> None:
    path = tmp_path / "dash.toml"
    path.write_text('[[nodes]]\nurl = "a:1"\n[[nodes]]\nurl = "ftp://rig7:9871"\n')
    with pytest.raises(DashConfigError, match=re.escape(f"{path}: nodes[1].url 'ftp://rig7:9871': not an agent URL")):
        resolve_targets([], load_dash_config(path), source=str(path))


def test_dash_refuses_a_relative_token_file_naming_the_file_and_the_node(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The command names dash.toml and the node, exit 2, whatever directory it runs in (a token
    file of that name there made no difference)."""
    monkeypatch.chdir(tmp_path)
    # Taken, the node would be followed: a dashboard on the test's terminal.
    monkeypatch.setattr(cli_dash, "run_dashboard", lambda *args: 0)
    token = tmp_path / "rel.token"
    token.write_text("s3cret\n")
    token.chmod(0o600)
    dash_toml = tmp_path / "dash.toml"
    dash_toml.write_text('[[nodes]]\nurl = "10.0.0.11:9871"\ntoken_file = "rel.token"\n')
    assert dash_command(["dash", "--config", str(dash_toml), "--log-file", str(tmp_path / "dash.log")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rigmon: {dash_toml}: nodes[0].token_file (node 10.0.0.11:9871): 'rel.token' is not an "
                          "absolute path")


@pytest.mark.parametrize("text", ["abc\ndef\n", "abc def\n", "abc\tdef", "ab\x07c\n"])
def test_dash_refuses_a_token_file_of_more_than_one_word_naming_the_file_and_the_setting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], text: str) -> None:
    """The dashboard took it and sent ``Bearer abc\\ndef``, a header no HTTP library carries: every
    request failed, saying nothing of the file. It is refused at start, as the agent refuses its own."""
    monkeypatch.setattr(cli_dash, "run_dashboard", lambda *args: 0)
    token = tmp_path / "b.token"
    token.write_text(text)
    token.chmod(0o600)
    dash_toml = tmp_path / "dash.toml"
    dash_toml.write_text(f'[[nodes]]\nurl = "10.0.0.11:9871"\ntoken_file = "{token}"\n')
    assert dash_command(["dash", "--config", str(dash_toml), "--log-file", str(tmp_path / "dash.log")]) == 2
    assert capsys.readouterr().err.startswith(
        f"rigmon: {dash_toml}: nodes[0].token_file (node 10.0.0.11:9871) {token} holds spaces, line breaks or "
        "control characters inside the token; it should hold one token on one line")
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    assert dash_command(["dash", "--config", str(empty), "--token-file", str(token), "--log-file",
                         str(tmp_path / "dash.log"), "10.0.0.12:9871"]) == 2
    assert capsys.readouterr().err.startswith(f"rigmon: --token-file {token} holds spaces, line breaks")
