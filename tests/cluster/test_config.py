"""Dashboard configuration: node list with tokens, theme, errors naming the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rigmon.cluster.config import (
    DashConfig,
    DashConfigError,
    NodeEntry,
    NodeTarget,
    load_dash_config,
    resolve_targets,
    user_config_path,
)


def test_loads_nodes_and_theme(tmp_path: Path) -> None:
    path = tmp_path / "dash.toml"
    path.write_text('theme = "rigmon-light"\n[[nodes]]\nurl = "http://a:9871"\ntoken = "t1"\n'
                    '[[nodes]]\nurl = "b:9871"\n')
    config = load_dash_config(path)
    assert config.theme == "rigmon-light"
    assert config.nodes == (NodeEntry(url="http://a:9871", token="t1"), NodeEntry(url="b:9871"))


@pytest.mark.parametrize(
    ("text", "key"),
    [("colour = 1\n", "colour"), ("[[nodes]]\ntoken = 'x'\n", "nodes[0].url"), ("theme = 3\n", "theme"),
     ("[[nodes]]\nurl = 'a'\nport = 1\n", "nodes[0].port"), ("theme = \n", "not valid TOML")],
)
def test_errors_name_the_key(tmp_path: Path, text: str, key: str) -> None:
    path = tmp_path / "dash.toml"
    path.write_text(text)
    with pytest.raises(DashConfigError, match=key.replace("[", r"\[").replace("]", r"\]")):
        load_dash_config(path)


def test_a_file_not_in_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "dash.toml"
    path.write_bytes(b'theme = "r\xf6st"\n')
    with pytest.raises(DashConfigError, match=f"^{path}: not UTF-8 text"):
        load_dash_config(path)


def test_default_path_and_absent_file(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    assert user_config_path(env) == tmp_path / "rigmon" / "dash.toml"
    assert load_dash_config(None, env) == DashConfig()
    assert user_config_path({"HOME": "/home/op"}) == Path("/home/op/.config/rigmon/dash.toml")


def test_targets_from_command_line_take_config_tokens(tmp_path: Path) -> None:
    token_file = tmp_path / "tok"
    token_file.write_text("t2\n")
    token_file.chmod(0o600)
    config = DashConfig(nodes=(NodeEntry("http://a:9871", token="t1"), NodeEntry("b:9871", token_file=str(token_file))))
    a = NodeTarget("http://a:9871", "t1", token_from="dash.toml: nodes[0].token (node http://a:9871)")
    b = NodeTarget("http://b:9871", "t2", token_from="dash.toml: nodes[1].token_file (node b:9871)")
    assert resolve_targets([], config) == [a, b]
    assert resolve_targets(["a:9871/", "c:1"], config) == [a, NodeTarget("http://c:1", token_where=(
        "with rigmon dash --token-file FILE, or as token_file of a [[nodes]] entry for http://c:1 in dash.toml"))]
    missing = DashConfig(nodes=(NodeEntry("a:1", token_file=str(tmp_path / "nope")),))
    with pytest.raises(DashConfigError, match="token_file"):
        resolve_targets([], missing)


def test_control_tokens_inline_or_from_a_file(tmp_path: Path) -> None:
    control_file = tmp_path / "ctl"
    control_file.write_text("c2\n")
    control_file.chmod(0o600)
    config = DashConfig(nodes=(NodeEntry("a:1", token="t1", control_token="c1"),
                               NodeEntry("b:1", control_token_file=str(control_file)), NodeEntry("c:1")))
    assert resolve_targets([], config) == [
        NodeTarget("http://a:1", "t1", "c1", token_from="dash.toml: nodes[0].token (node a:1)"),
        NodeTarget("http://b:1", None, "c2", token_where="in dash.toml: nodes[1].token_file (node b:1)"),
        NodeTarget("http://c:1", token_where="in dash.toml: nodes[2].token_file (node c:1)")]
    assert resolve_targets(["d:1"], config) == [NodeTarget("http://d:1", token_where=(
        "with rigmon dash --token-file FILE, or as token_file of a [[nodes]] entry for http://d:1 in dash.toml"))]
    missing = DashConfig(nodes=(NodeEntry("a:1", control_token_file=str(tmp_path / "nope")),))
    with pytest.raises(DashConfigError, match="control_token_file"):
        resolve_targets([], missing)
    control_file.chmod(0o644)
    with pytest.raises(DashConfigError, match="control_token_file .* readable or writable by other users"):
        resolve_targets([], config)


def test_a_ca_file_under_home_is_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # `rigmon setup agent` prints `ca_file = "~/.config/rigmon/<node>.pem"` for dash.toml: taken as
    # it stood, the node read "unreachable: internal error: FileNotFoundError".
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".config/rigmon").mkdir(parents=True)
    (tmp_path / ".config/rigmon/a.pem").write_text("x")
    (tmp_path / "b.pem").write_text("x")
    config = DashConfig(nodes=(NodeEntry("https://a:1", ca_file="~/.config/rigmon/a.pem"),))
    (target,) = resolve_targets([], config)
    assert target.ca_file == str(tmp_path / ".config/rigmon/a.pem")
    (target,) = resolve_targets(["https://b:1"], DashConfig(), ca_file="~/b.pem")
    assert target.ca_file == str(tmp_path / "b.pem")
    # One that is not there is said at start, naming the key.
    with pytest.raises(DashConfigError, match=r"ca_file ~/c.pem: No such file or directory"):
        resolve_targets(["https://c:1"], DashConfig(), ca_file="~/c.pem")


@pytest.mark.parametrize("url", ["http://[::1", "http://h:x", "ftp://rig7:9871", "http://:9871"])
def test_what_is_no_agent_url_is_refused_naming_it(url: str) -> None:
    # `http://[::1` was taken, and its node then stayed "connecting" (no client could be built for it).
    with pytest.raises(DashConfigError, match=re.escape(url)):
        resolve_targets([url], DashConfig())


def test_urls_of_the_configuration_are_checked_too(tmp_path: Path) -> None:
    path = tmp_path / "dash.toml"
    path.write_text('[[nodes]]\nurl = "http://[fe80::1"\n')
    with pytest.raises(DashConfigError, match="not a URL"):
        resolve_targets([], load_dash_config(path))
    assert [t.url for t in resolve_targets(["rig7:9871", "https://[::1]:9871/"], DashConfig())] == [
        "http://rig7:9871", "https://[::1]:9871"]
