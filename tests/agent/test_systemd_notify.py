"""The agent tells systemd it is ready once its port is bound (``Type=notify``), so a ``systemctl start``
fails when it cannot listen (a port another program took after setup checked it), instead of
succeeding and restarting a failing agent for ever (real sockets, a real agent process)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rigmon.agent.systemd_notify import notify_ready

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    """A datagram socket standing for systemd's, and its address as NOTIFY_SOCKET gives it."""
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(60.0)
        yield sock, str(path)


def agent(tmp_path: Path, listen: str, notify: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rigmon", "agent", "--root", str(tmp_path), "--state-dir", str(tmp_path / "state"),
         "--listen", listen], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "NOTIFY_SOCKET": notify})


def test_ready_and_a_status_line_go_to_the_socket(notify_socket: tuple[socket.socket, str]) -> None:
    sock, address = notify_socket
    assert notify_ready("listening on\nhttp://127.0.0.1:9871", {"NOTIFY_SOCKET": address})
    assert sock.recv(4096) == b"READY=1\nSTATUS=listening on http://127.0.0.1:9871"


def test_an_abstract_socket_is_reached() -> None:
    name = f"rigmon-test-notify-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(60.0)
        assert notify_ready("ok", {"NOTIFY_SOCKET": "@" + name})
        assert sock.recv(4096).startswith(b"READY=1\n")


def test_without_systemd_nothing_is_sent(tmp_path: Path) -> None:
    assert not notify_ready("ok", {})
    assert not notify_ready("ok", {"NOTIFY_SOCKET": "vsock:2:1234"})
    assert not notify_ready("ok", {"NOTIFY_SOCKET": str(tmp_path / "no-such-socket")})  # logged, not raised


def test_the_agent_says_ready_once_it_listens(tmp_path: Path, notify_socket: tuple[socket.socket, str]) -> None:
    sock, address = notify_socket
    proc = agent(tmp_path, "127.0.0.1:0", address)
    try:
        message = sock.recv(4096).decode()
        assert message.startswith("READY=1\nSTATUS=node ")
        port = int(message.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=60.0):
            pass  # listening when it says so
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_an_agent_that_cannot_listen_never_says_ready(tmp_path: Path,
                                                      notify_socket: tuple[socket.socket, str]) -> None:
    sock, address = notify_socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = agent(tmp_path, f"127.0.0.1:{port}", address)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert f"rigmon: cannot serve on 127.0.0.1:{port}: port {port} is in use by another program" in stderr
    sock.setblocking(False)
    with pytest.raises(BlockingIOError):
        sock.recv(4096)  # systemd's start fails with the agent's exit
