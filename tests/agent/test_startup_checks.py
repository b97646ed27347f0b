"""What `rigmon agent` refuses at start (issue 15, item 8): a token file that is not a regular file
(a FIFO hung the start for good), one token for reading and control, and absurd numbers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rigmon.config import AGENT_RANGES, ConfigError, load_agent_config

REPO = Path(__file__).resolve().parents[2]
#: Longest a refusal may take; the FIFO used to block forever.
TIMEOUT_S = 30


def agent(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rigmon", "agent", "--root", str(tmp_path), "--state-dir", str(tmp_path / "state"),
         "--listen", "127.0.0.1:0", *args],
        capture_output=True, text=True, timeout=TIMEOUT_S, env={**os.environ, "PYTHONPATH": str(REPO)})


def private(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_a_fifo_as_token_file_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "token.fifo"
    os.mkfifo(fifo, 0o600)
    out = agent(tmp_path, "--token-file", str(fifo))
    assert out.returncode == 2
    assert f"rigmon: --token-file {fifo} is a FIFO" in out.stderr and "regular file" in out.stderr


def test_a_fifo_as_control_token_file_names_that_key(tmp_path: Path) -> None:
    fifo = tmp_path / "control.fifo"
    os.mkfifo(fifo, 0o600)
    token = private(tmp_path / "read.token", "read-token\n")
    out = agent(tmp_path, "--token-file", str(token), "--control-token-file", str(fifo))
    assert out.returncode == 2 and f"rigmon: --control-token-file {fifo} is a FIFO" in out.stderr


def test_a_port_in_use_is_one_line_naming_the_address_and_the_reason(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = agent(tmp_path, "--listen", f"127.0.0.1:{port}")
    assert out.returncode == 2
    # uvicorn's own error line came first, and the reason was "(see the error above)".
    errors = [line for line in out.stderr.splitlines() if "INFO" not in line]
    assert errors == [(f"rigmon: cannot serve on 127.0.0.1:{port}: port {port} is in use by another program "
                       f"(`ss -ltnp 'sport = :{port}'` names it); the address is --listen")], out.stderr


def test_a_port_in_use_names_the_configuration_key_that_gave_it(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "agent.toml"
        config.write_text(f'[agent]\nlisten = "127.0.0.1:{port}"\n')
        out = subprocess.run(
            [sys.executable, "-m", "rigmon", "agent", "--config", str(config), "--root", str(tmp_path),
             "--state-dir", str(tmp_path / "state")], capture_output=True, text=True, timeout=TIMEOUT_S,
            env={**{k: v for k, v in os.environ.items() if k != "RIGMON_AGENT_LISTEN"}, "PYTHONPATH": str(REPO)})
    assert out.returncode == 2
    assert f"rigmon: cannot serve on 127.0.0.1:{port}: port {port} is in use" in out.stderr
    assert f"the address is {config}: agent.listen" in out.stderr, out.stderr


def test_a_directory_as_token_file_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "tokens"
    folder.mkdir(mode=0o700)
    out = agent(tmp_path, "--token-file", str(folder))
    assert out.returncode == 2 and f"rigmon: --token-file {folder} is a directory" in out.stderr
    # A directory made as usual (755) is a directory too, not a file "readable by other users".
    folder.chmod(0o755)
    out = agent(tmp_path, "--token-file", str(folder))
    assert out.returncode == 2 and f"rigmon: --token-file {folder} is a directory" in out.stderr, out.stderr


def test_a_device_as_token_file_is_refused_without_advice_to_chmod_it(tmp_path: Path) -> None:
    """``--token-file /dev/null`` was "readable or writable by other users; chmod 600 it": advice that,
    taken as root, breaks /dev/null for the whole machine."""
    out = agent(tmp_path, "--token-file", "/dev/null")
    assert out.returncode == 2
    assert out.stderr == "rigmon: --token-file /dev/null is a character device; a token file must be a regular file\n", out.stderr
    fifo = tmp_path / "token.fifo"
    os.mkfifo(fifo, 0o644)
    out = agent(tmp_path, "--token-file", str(fifo))
    assert out.returncode == 2 and out.stderr == f"rigmon: --token-file {fifo} is a FIFO; a token file must be a regular file\n"


@pytest.mark.parametrize("text", ["first-token\nsecond-token\n", "Bearer a-token\n", "a-token\tmore\n"])
def test_a_token_file_holding_more_than_one_word_is_refused(tmp_path: Path, text: str) -> None:
    """The agent started with it, and refused every client 401: no header carries a line break."""
    token = private(tmp_path / "read.token", text)
    out = agent(tmp_path, "--token-file", str(token))
    assert out.returncode == 2
    assert out.stderr == (f"rigmon: --token-file {token} holds spaces, line breaks or control characters "
                          "inside the token; it should hold one token on one line\n"), out.stderr


def test_a_token_file_s_trailing_newline_is_not_part_of_the_token(tmp_path: Path) -> None:
    from rigmon.agent.server import read_token_file

    token = private(tmp_path / "read.token", "  0123abcd\r\n")
    assert read_token_file(str(token), "--token-file") == "0123abcd"


def test_an_unknown_user_is_refused_before_the_agent_announces_its_address(tmp_path: Path) -> None:
    """It bound its port, printed its address (which a script takes as started) and ran, then failed."""
    out = agent(tmp_path, "--user", "no-such-rigmon-user")
    assert out.returncode == 2
    assert out.stdout == "" and out.stderr == "rigmon: --user no-such-rigmon-user: no such user\n", out.stderr
    config = private(tmp_path / "agent.toml", '[agent]\nuser = "no-such-rigmon-user"\n')
    out = agent(tmp_path, "--config", str(config))
    assert out.stderr == f"rigmon: {config}: agent.user no-such-rigmon-user: no such user\n", out.stderr


def test_one_token_for_reading_and_control_is_refused(tmp_path: Path) -> None:
    read = private(tmp_path / "read.token", "same-secret\n")
    control = private(tmp_path / "control.token", "same-secret")
    out = agent(tmp_path, "--token-file", str(read), "--control-token-file", str(control))
    assert out.returncode == 2
    assert "--control-token-file holds the same token as --token-file" in out.stderr


@pytest.mark.parametrize(("key", "value"), [
    ("max_request_bytes", "-1"),
    ("max_request_bytes", "0"),
    ("max_request_bytes", "1073741824"),
    ("interval_s", "0.000001"),
    ("interval_s", "0"),
    ("interval_s", "nan"),
    ("interval_s", "inf"),
    ("buffer_frames", "100000000"),
    ("max_streams", "0"),
    ("max_streams", "1000000"),
    ("collector_timeout_s", "0"),
    ("head_timeout_s", "0.01"),
    ("head_timeout_s", "3600"),
    ("max_connections_per_client", "0"),
    ("rate_limit_per_s", "-1"),
    ("rate_limit_burst", "0"),
])
def test_numbers_out_of_range_are_refused_naming_the_key(tmp_path: Path, key: str, value: str) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(f"[agent]\n{key} = {value}\n")
    with pytest.raises(ConfigError, match=f"agent[:.] ?{key}(: expected a finite| must be between)"):
        load_agent_config(config)


def test_the_cli_refuses_an_absurd_interval_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text("[agent]\ninterval_s = 0.000001\n")
    out = agent(tmp_path, "--config", str(config))
    assert out.returncode == 2 and "interval_s must be between 0.01 and 3600" in out.stderr


@pytest.mark.parametrize(("section", "key", "value"), [
    ("journal", "commit_interval_s", "0"),
    ("journal", "queue_frames", "0"),
    ("journal", "max_mb", "0.001"),
    ("alarms", "save_interval_s", "0.000001"),
    ("gpu", "nvml_timeout_s", "100000"),
    ("psu", "baud", "100000000"),
    ("psu", "poll_interval_s", "0.000001"),
    ("notify_timeout", "timeout_s", "100000"),
    ("storage", "net_stall_after_s", "1e9"),
])
def test_numbers_of_other_sections_are_range_checked(tmp_path: Path, section: str, key: str, value: str) -> None:
    config = tmp_path / "agent.toml"
    if section == "notify_timeout":
        config.write_text(f'[[notify]]\nkind = "webhook"\nurl = "http://127.0.0.1:1/"\n{key} = {value}\n')
    else:
        config.write_text(f"[{section}]\n{key} = {value}\n")
    with pytest.raises(ConfigError, match=key):
        load_agent_config(config)


def test_every_agent_number_has_a_range() -> None:
    from rigmon.config import AgentSection
    from rigmon.typed import record_fields

    numbers = {f.name for f in record_fields(AgentSection) or () if f.type in (int, float)}
    assert numbers == set(AGENT_RANGES)


async def test_the_address_the_agent_announces_accepts_connections_at_once(tmp_path: Path) -> None:
    """The line saying where the agent serves came before its socket listened: a script that
    connected on reading it was refused (ECONNREFUSED) until the server started."""
    import asyncio
    import socket

    from rigmon.agent.agent import Agent
    from rigmon.agent.server import serve
    from rigmon.config import AgentConfig, AgentSection

    config = AgentConfig(agent=AgentSection(node="n1", listen="127.0.0.1:0", root=str(tmp_path),
                                            state_dir=str(tmp_path / "state")))
    agent = Agent(config)
    refused: list[str] = []

    def on_bound(bound: str) -> None:
        # What a script does with the line: connect at once (here, before the server runs at all).
        host, _, port = bound.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
        except OSError as exc:
            refused.append(str(exc))
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await serve(agent, config.agent.listen, on_bound=on_bound)
    assert refused == []


def test_the_address_s_origin_follows_the_precedence_of_flag_environment_and_file(tmp_path: Path) -> None:
    import argparse

    from rigmon.cli_agent import listen_origin

    config = tmp_path / "agent.toml"
    config.write_text("")
    flag = argparse.Namespace(listen="127.0.0.1:1", config=str(config))
    file = argparse.Namespace(listen=None, config=str(config))
    assert listen_origin(flag, {"RIGMON_AGENT_LISTEN": "127.0.0.1:2"}) == "--listen"
    assert listen_origin(file, {"RIGMON_AGENT_LISTEN": "127.0.0.1:2"}) == "environment RIGMON_AGENT_LISTEN"
    assert listen_origin(file, {}) == f"{config}: agent.listen"


def started_agent_log(tmp_path: Path, listen: str, *args: str) -> str:
    """What an agent logs up to its start, once it has announced its address (then it is stopped)."""
    started = subprocess.Popen(
        [sys.executable, "-m", "rigmon", "agent", "--root", str(tmp_path), "--state-dir", str(tmp_path / "state"),
         "--listen", listen, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert started.stdout is not None and " on http://" in started.stdout.readline()
    finally:
        started.terminate()
        _, err = started.communicate(timeout=TIMEOUT_S)
    return err


def test_a_token_served_over_plain_http_beyond_loopback_is_warned_of(tmp_path: Path) -> None:
    """The read token crossed the network in clear text and the agent said nothing of it."""
    token = private(tmp_path / "read.token", "a-read-token\n")
    err = started_agent_log(tmp_path, "0.0.0.0:0", "--token-file", str(token))
    warned = [line for line in err.splitlines() if "WARNING" in line and "plain HTTP" in line]
    assert len(warned) == 1 and "the read token crosses the network in clear text" in warned[0], err
    assert "--tls-cert and --tls-key" in warned[0]
    assert "plain HTTP" not in started_agent_log(tmp_path, "127.0.0.1:0", "--token-file", str(token))
