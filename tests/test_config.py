"""Agent configuration: defaults, TOML, environment overrides, errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.config import ConfigError, load_agent_config, split_listen
from tests.config_errors import config_error


def test_defaults_work_without_a_file(tmp_path: Path) -> None:
    config = load_agent_config(None, environ={})
    assert config.agent.listen == "127.0.0.1:9871"
    assert config.collector("host").enabled


def test_file_env_and_overrides_in_that_order(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text('[agent]\nnode = "rig1"\ninterval_s = 2.0\n[collectors.host]\nenabled = false\n')
    config = load_agent_config(path, {"listen": "127.0.0.1:9000"}, environ={"RIGMON_AGENT_INTERVAL_S": "0.5"})
    assert config.node_name == "rig1"
    assert config.agent.interval_s == 0.5
    assert config.agent.listen == "127.0.0.1:9000"
    assert not config.collector("host").enabled


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[agent]\nbuffer_frames = -1\n", "agent"),
        ("[agent]\nlisten = \"nowhere\"\n", "agent"),
        ("[agnet]\n", "agnet"),
        ("[collectors.host]\nenabled = \"yes\"\n", "collectors.host.enabled"),
        ("agent = 3\n", "agent"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, text: str, key: str) -> None:
    assert f": {key}" in config_error(tmp_path, text)[1]


def test_bad_toml_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text("[agent\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_agent_config(path, environ={})
    with pytest.raises(ConfigError, match="cannot read"):
        load_agent_config(tmp_path / "missing.toml", environ={})
    # Saved in Latin-1 by an editor: the file is named, not a bare codec error.
    path.write_bytes(b'[agent]\nnode = "r\xf6st"\n')
    with pytest.raises(ConfigError, match=f"^{path}: not UTF-8 text"):
        load_agent_config(path, environ={})


def test_unknown_environment_key() -> None:
    with pytest.raises(ConfigError, match="RIGMON_AGENT_COLOUR"):
        load_agent_config(None, environ={"RIGMON_AGENT_COLOUR": "red"})


@pytest.mark.parametrize(("listen", "expected"), [("127.0.0.1:1", ("127.0.0.1", 1)), ("[::1]:9871", ("::1", 9871))])
def test_split_listen(listen: str, expected: tuple[str, int]) -> None:
    assert split_listen(listen) == expected


PEERS = """
[probes]
rate_hz = 20
key_file = "/etc/rigmon/probe.key"

[[peers]]
name = "node02"
paths = [
  { name = "tbnet", address = "10.0.0.2", interface = "thunderbolt0" },
  { name = "mgmt", address = "192.168.1.12", transport = "tcp" },
]
"""


def test_probes_and_peers(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(PEERS)
    config = load_agent_config(path, environ={})
    assert config.probes.rate_hz == 20 and config.probes.window_s == 10.0 and config.probes.port == 9872
    (peer,) = config.peers
    tbnet, mgmt = peer.paths
    assert (tbnet.name, tbnet.address, tbnet.interface, tbnet.transport) == ("tbnet", "10.0.0.2", "thunderbolt0", "udp")
    assert tbnet.target_port(config.probes) == 9872
    assert mgmt.target_port(config.probes) == 9871  # the peer agent's HTTP port
    assert load_agent_config(None, environ={}).peers == ()  # no peers: probes are off


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[probes]\nrate_hz = 0\n", "probes"),
        ("[probes]\nport = 70000\n", "probes"),
        ("[probes]\nport = -1\n", "probes"),
        ("[probes]\nbind = \"everywhere\"\n", "probes"),
        ("[probes]\nloss_limit_pct = 101\n", "probes"),
        ("[probes]\nrate_hz = 1000\nwindow_s = 3600\n", "probes"),
        ("[probes]\nrate_hz = 500\n", "probes"),  # above the peers' default reply rate (200/s): all lost
        ("[[peers]]\nname = \"node02\"\npaths = [{ name = \"x\", address = \"10.0.0.x\" }]\n", "peers[0].paths[0]"),
        ("[[peers]]\nname = \"node02\"\npaths = [{ name = \"x\", address = \"10.0.0.2\", transport = \"icmp\" }]\n",
         "peers[0].paths[0].transport"),
        ("[[peers]]\nname = \"node02\"\npaths = [{ name = \"x\" }]\n", "peers[0].paths[0].address"),
        ("[[peers]]\nname = \"node/02\"\n", "peers[0]"),
        ("[[peers]]\nname = \"node02\"\npaths = [{ name = \"a\", address = \"10.0.0.2\" },"
         " { name = \"a\", address = \"10.0.0.3\" }]\n", "peers[0]"),
        ("[[peers]]\nname = \"node02\"\n[[peers]]\nname = \"node02\"\n", "peers[1].name"),
        ("[[peers]]\nname = \"node02\"\ncolour = 1\n", "peers[0].colour"),
        ("[probes]\nport = 0\n[[peers]]\nname = \"node02\"\npaths = [{ name = \"a\", address = \"10.0.0.2\" }]\n",
         "peers[0].paths[0].port"),
        # No interface has such a name: the path's link speed read null for ever, and nothing said why.
        ("[[peers]]\nname = \"node02\"\npaths = [{ name = \"a\", address = \"10.0.0.2\", interface = \"thunderbolt0 \" }]\n",
         "peers[0].paths[0].interface"),
        ("[[peers]]\nname = \"node02\"\npaths = [{ name = \"a\", address = \"10.0.0.2\", interface = \"../net/eth0\" }]\n",
         "peers[0].paths[0].interface"),
        ("[[peers]]\nname = \"node02\"\npaths = [{ name = \"a\", address = \"10.0.0.2\", interface = \"thunderbolt0123456\" }]\n",
         "peers[0].paths[0].interface"),
        # The link-local address goes out of thunderbolt0; the speed shown would be thunderbolt1's.
        (("[[peers]]\nname = \"node02\"\npaths = [{ name = \"a\", address = \"fe80::2%thunderbolt0\", "
          "interface = \"thunderbolt1\" }]\n"), "peers[0].paths[0].interface"),
    ],
)
def test_bad_probe_config_names_the_key(tmp_path: Path, text: str, key: str) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_agent_config(path, environ={})
    assert key in str(info.value)


def test_a_check_of_the_whole_file_names_the_file_and_key_without_a_root_path(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text('[[peers]]\nname = "node02"\n[[peers]]\nname = "node02"\n')
    with pytest.raises(ConfigError) as info:
        load_agent_config(path, environ={})
    assert str(info.value) == f"{path}: peers[1].name: 'node02' appears twice"


def test_a_bad_value_from_the_environment_or_command_line_is_not_blamed_on_the_file(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text('[agent]\nnode = "rig1"\n')
    with pytest.raises(ConfigError) as info:
        load_agent_config(path, environ={"RIGMON_AGENT_INTERVAL_S": "nan"})
    assert str(info.value).startswith("environment RIGMON_AGENT_INTERVAL_S: agent.interval_s: expected a finite")
    with pytest.raises(ConfigError) as info:
        load_agent_config(path, {"listen": "bad"}, environ={"RIGMON_AGENT_INTERVAL_S": "2"})
    assert str(info.value).startswith("command line (listen): agent.listen must be HOST:PORT, got 'bad'")
    with pytest.raises(ConfigError) as info:
        load_agent_config(None, {"listen": "127.0.0.1:99999"}, environ={})
    assert str(info.value).startswith("command line (listen): agent.listen must be HOST:PORT with a PORT "
                                      "from 0 to 65535, got '127.0.0.1:99999'")
    # The file's own mistake is still the file's, whatever else is set.
    path.write_text('[agent]\ninterval_s = 0\n')
    with pytest.raises(ConfigError) as info:
        load_agent_config(path, {"listen": "127.0.0.1:1"}, environ={"RIGMON_AGENT_NODE": "x"})
    assert str(info.value).startswith(f"{path}: agent.interval_s must be between")


def test_an_integer_key_from_the_environment_asks_for_an_integer() -> None:
    with pytest.raises(ConfigError, match="RIGMON_AGENT_MAX_STREAMS: expected an integer, got '2.5'"):
        load_agent_config(None, environ={"RIGMON_AGENT_MAX_STREAMS": "2.5"})


def test_probing_faster_than_a_peer_answers_one_address_is_refused_naming_both_keys(tmp_path: Path) -> None:
    """rate_hz 500 against the default reply rate (200 a second to one address): a peer with the same
    [probes] refuses 3 probes in 5, and every path read lossy and alarmed. Raising both is fine."""
    path = tmp_path / "agent.toml"
    path.write_text("[probes]\nrate_hz = 500\n")
    with pytest.raises(ConfigError, match="rate_hz.*reply_rate_per_s"):
        load_agent_config(path, environ={})
    path.write_text("[probes]\nrate_hz = 500\nreply_rate_per_s = 1000\n")
    assert load_agent_config(path, environ={}).probes.rate_hz == 500
