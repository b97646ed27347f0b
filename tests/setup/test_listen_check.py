"""Setup's check that the agent will be able to listen before it starts the service (real sockets)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from rigmon.setup.listen_check import listen_problem


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
