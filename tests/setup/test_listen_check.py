"""Setup's check that the agent will be able to listen before it starts the service (real sockets)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from rigmon.setup.listen_check import last_error, listen_problem


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port on 127.0.0.1 another program listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


def never_running() -> bool:
    return False


def test_a_port_another_program_listens_on_is_named(held_port: int) -> None:
    problem = listen_problem(f"127.0.0.1:{held_port}", never_running)
    assert problem is not None
    assert f"port {held_port} is in use by another program" in problem
    assert f"sport = :{held_port}" in problem


def test_every_address_conflicts_with_one_address_held(held_port: int) -> None:
    assert listen_problem(f"0.0.0.0:{held_port}", never_running) is not None


def test_a_port_held_while_the_agent_runs_is_its_own(held_port: int) -> None:
    assert listen_problem(f"127.0.0.1:{held_port}", lambda: True) is None


def test_a_free_port_asks_nothing_of_systemd() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def asked() -> bool:
        raise AssertionError("systemd asked about a free port")

    assert listen_problem(f"127.0.0.1:{port}", asked) is None


def test_an_address_this_machine_does_not_have_is_said() -> None:
    problem = listen_problem("192.0.2.1:9101", never_running)  # TEST-NET-1: on no machine
    assert problem is not None and "192.0.2.1 is not an address of this machine" in problem


def test_a_failed_start_is_told_by_the_agent_s_own_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A program that took the port between the check and the start: `systemctl start` says only that
    # the job failed; the unit's log since the start holds the agent's reason.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    journalctl = bin_dir / "journalctl"
    journalctl.write_text(f"""#!/bin/sh
echo "$@" > {tmp_path / "args"}
echo "Started rigmon agent."
echo "rigmon: cannot serve on 0.0.0.0:9871: port 9871 is in use by another program; the address is x: agent.listen"
echo "rigmon-agent.service: Main process exited, code=exited, status=2/INVALIDARGUMENT"
""")
    journalctl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert last_error("rigmon-agent.service", 1_800_000_000.7) == (
        "rigmon: cannot serve on 0.0.0.0:9871: port 9871 is in use by another program; the address is x: agent.listen")
    args = (tmp_path / "args").read_text().split()
    assert args[:4] == ["--unit", "rigmon-agent.service", "--since", "@1800000000"]


def test_no_journal_says_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no journalctl
    assert last_error("rigmon-agent.service", 0.0) is None
