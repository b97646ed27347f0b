"""Idle and half-open connections against a live agent on 127.0.0.1: they cannot take it off the air.

Issue 15, item 1: 64 sockets that never sent a byte made every new request answer 503,
``/healthz`` included, for as long as they were held. Every test runs with each of uvicorn's
HTTP parsers the agent can use (httptools, h11 when httptools is missing): the guards must
hold with both.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rigmon.agent import connections
from rigmon.agent.agent import Agent
from rigmon.agent.background import BackgroundAgent
from rigmon.config import AgentConfig, AgentSection

TOKEN = "read-token-for-idle-tests"
CONTROL = "control-token-for-idle-tests"
#: More idle sockets than the agent holds connections (max_streams + 32 = 64 by default).
IDLE = 80
#: Longest real time the test waits for something the agent must do.
WAIT_S = 20.0


@pytest.fixture(autouse=True, params=["httptools", "h11"])
def http_parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The parser the agents of the test use: httptools (a dependency), or h11 as when it is missing."""
    parser: str = request.param
    if parser == "httptools":
        assert connections.httptools_available(), "httptools is a dependency of the agent: pip install -e ."
    else:
        monkeypatch.setattr(connections, "httptools_available", lambda: False)
    return parser


@contextlib.contextmanager
def live_agent(tmp_path: Path, **agent: object) -> Iterator[tuple[str, int]]:
    section = AgentSection(node="idle", root=str(tmp_path), interval_s=0.05, state_dir=str(tmp_path / "state"),
                           **agent)  # type: ignore[arg-type]
    background = BackgroundAgent(Agent(AgentConfig(agent=section), token=TOKEN, control_token=CONTROL,
                                       collectors={}))
    url = background.start()
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    try:
        yield host, int(port)
    finally:
        background.stop()


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def request(port: int, path: str, token: str | None = TOKEN, source: str = "127.0.0.1") -> tuple[int, bytes]:
    """One request on a new connection: status and body."""
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    with connect(port, source) as sock:
        sock.settimeout(WAIT_S)
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: agent\r\n{auth}Connection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def closed_by_peer(sock: socket.socket, timeout_s: float) -> bool:
    """Whether the agent closes ``sock`` within ``timeout_s`` (reads EOF or a reset)."""
    sock.settimeout(timeout_s)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def still_open(sock: socket.socket) -> bool:
    """Whether ``sock`` is open right now (nothing to read, no EOF)."""
    sock.setblocking(False)
    try:
        return not sock.recv(1) == b""
    except BlockingIOError:
        return True
    except ConnectionResetError:
        return False
    finally:
        sock.setblocking(True)


class Subscriber:
    """A /v1/stream subscription read line by line."""

    def __init__(self, port: int) -> None:
        self.sock = connect(port)
        self.sock.settimeout(WAIT_S)
        self.sock.sendall(f"GET /v1/stream HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode())
        self.buffer = b""

    def next_frame_id(self) -> int:
        while True:
            line, sep, rest = self.buffer.partition(b"\n")
            if sep:
                self.buffer = rest
                if line.startswith(b"id: "):
                    return int(line[4:])
                continue
            chunk = self.sock.recv(65536)
            assert chunk, "the agent closed the event stream"
            self.buffer += chunk


def test_idle_sockets_leave_room_for_a_subscriber_and_a_reconnecting_client(tmp_path: Path) -> None:
    # The longest head timeout: the sockets stay until the agent needs their room.
    with live_agent(tmp_path, head_timeout_s=60.0) as (_, port):
        subscriber = Subscriber(port)
        first = subscriber.next_frame_id()
        idle = [connect(port) for _ in range(IDLE)]
        try:
            # A dashboard that lost its connection comes back: health, then data.
            assert request(port, "/healthz", token=None) == (200, b'{"ok":true}')
            status, _ = request(port, "/v1/latest")
            assert status == 200
            status, _ = request(port, "/v1/alarms")
            assert status == 200
            # The live subscription kept flowing the whole time.
            assert subscriber.next_frame_id() > first
            # The subscriber and a fresh stream both work while idle sockets are held.
            again = Subscriber(port)
            assert again.next_frame_id() > 0
            again.sock.close()
            # Idle sockets were closed to make that room; the agent held no more than its limit.
            assert sum(still_open(s) for s in idle) <= 64
        finally:
            for sock in idle:
                sock.close()
            subscriber.sock.close()


def test_a_connection_without_a_complete_head_is_closed_after_the_head_timeout(tmp_path: Path) -> None:
    with live_agent(tmp_path, head_timeout_s=1.0) as (_, port):
        silent = connect(port)
        # A slow-loris head: started, never finished.
        partial = connect(port)
        partial.sendall(b"GET /v1/latest HTTP/1.1\r\nHost: agent\r\nX-Slow: ")
        # A keep-alive connection that got its answer and then went quiet.
        quiet = connect(port)
        quiet.sendall(f"GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n".encode())
        quiet.settimeout(WAIT_S)
        answer = b""
        while not answer.endswith(b'{"ok":true}'):
            chunk = quiet.recv(65536)
            assert chunk, answer
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200")
        quiet.sendall(b"GET /healthz HTTP/1.1\r\n")
        for name, sock in (("silent", silent), ("partial", partial), ("quiet", quiet)):
            assert closed_by_peer(sock, WAIT_S), f"the {name} connection stayed open"
            sock.close()
        assert request(port, "/healthz", token=None)[0] == 200


def test_one_address_holds_at_most_its_share_of_connections(tmp_path: Path) -> None:
    with live_agent(tmp_path, head_timeout_s=60.0, max_connections_per_client=4) as (_, port):
        held = [connect(port, "127.0.0.2") for _ in range(10)]
        # The newest connection of that address gets in; its oldest idle ones made room.
        assert request(port, "/healthz", token=None, source="127.0.0.2")[0] == 200
        deadline = time.monotonic() + WAIT_S
        while sum(still_open(s) for s in held) > 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [still_open(s) for s in held].count(True) <= 4
        assert not still_open(held[0]) and still_open(held[-1])
        # Another address is not affected by that one's share.
        other = [connect(port, "127.0.0.3") for _ in range(3)]
        assert request(port, "/healthz", token=None, source="127.0.0.3")[0] == 200
        assert all(still_open(s) for s in other)
        for sock in held + other:
            sock.close()


@pytest.mark.parametrize("value", [0.0, 0.1, 61.0])
def test_head_timeout_out_of_range_is_refused(value: float) -> None:
    with pytest.raises(ValueError, match="head_timeout_s"):
        AgentSection(head_timeout_s=value)


def test_a_pipelined_stream_is_not_cut_by_the_head_timeout(tmp_path: Path) -> None:
    # Two requests in one packet: the second (an event stream) is parsed while the first's answer
    # completes; the clock for the next head must not run while the stream is served.
    with live_agent(tmp_path, head_timeout_s=0.5) as (_, port):
        sub = Subscriber.__new__(Subscriber)
        sub.sock = connect(port)
        sub.sock.settimeout(WAIT_S)
        sub.buffer = b""
        sub.sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n"
                         + f"GET /v1/stream HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode())
        first = sub.next_frame_id()
        # Frames come every 0.05 s: 40 of them span several head timeouts.
        while (last := sub.next_frame_id()) < first + 40:
            pass
        assert last >= first + 40
        sub.sock.close()


def test_when_every_slot_is_serving_a_new_connection_is_answered_503(tmp_path: Path) -> None:
    # max_streams = 1: 33 connections in all. Each of these is being served (its head is in,
    # its body is awaited), so none is closed to make room.
    with live_agent(tmp_path, max_streams=1, max_connections_per_client=64) as (_, port):
        busy = []
        for _ in range(33):
            sock = connect(port)
            sock.settimeout(WAIT_S)
            sock.sendall(f"POST /v1/alarms/x/ack HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer {CONTROL}\r\n"
                         f"Content-Length: 100\r\nExpect: 100-continue\r\n\r\n".encode())
            # The agent asks for the body: it has read the head and is serving this request.
            assert sock.recv(65536).startswith(b"HTTP/1.1 100 Continue")
            busy.append(sock)
        status, body = request(port, "/healthz", token=None)
        assert status == 503 and b"too many connections" in body
        assert all(still_open(s) for s in busy)
        busy[0].close()
        deadline = time.monotonic() + WAIT_S
        while request(port, "/healthz", token=None)[0] != 200:
            assert time.monotonic() < deadline, "a freed slot was never reused"
            time.sleep(0.05)
        for sock in busy:
            sock.close()


def test_a_tls_connection_without_a_handshake_is_closed_after_the_head_timeout(tmp_path: Path) -> None:
    from tests.agent.tls_certs import make_tls_files

    tls = make_tls_files(tmp_path)
    with live_agent(tmp_path, head_timeout_s=1.0, tls_cert_file=str(tls.cert_file),
                    tls_key_file=str(tls.key_file)) as (_, port):
        # Connected, never a byte: before the handshake, asyncio held it for 60 s.
        silent = connect(port)
        assert closed_by_peer(silent, WAIT_S)
        silent.close()


def test_idle_connections_of_clients_with_a_token_are_closed_last(tmp_path: Path) -> None:
    with live_agent(tmp_path, head_timeout_s=60.0, max_connections_per_client=4) as (_, port):
        # A dashboard between two polls: one answered request with the token, kept alive.
        dashboard = connect(port, "127.0.0.2")
        dashboard.settimeout(WAIT_S)
        dashboard.sendall(f"GET /v1/info HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode())
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            answer += dashboard.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200")
        # A guess at the token counts as no token.
        guesser = connect(port, "127.0.0.2")
        guesser.settimeout(WAIT_S)
        guesser.sendall(b"GET /v1/info HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer wrong\r\n\r\n")
        assert guesser.recv(65536).startswith(b"HTTP/1.1 401")
        idle = [connect(port, "127.0.0.2") for _ in range(6)]
        assert request(port, "/healthz", token=None, source="127.0.0.2")[0] == 200
        deadline = time.monotonic() + WAIT_S
        while still_open(guesser) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not still_open(guesser)
        assert still_open(dashboard)
        for sock in [dashboard, guesser, *idle]:
            sock.close()
