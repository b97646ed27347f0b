"""Request size limits counted as bytes arrive, over raw sockets against a live agent (issue 15, item 7).

A 100 KB header in one packet was accepted, and a 200 MB chunked body to an acknowledgement
was read whole into memory. The agent must answer an error early and close.
"""

from __future__ import annotations

import select
import socket
import time
from pathlib import Path

import pytest

from tests.faults.test_idle_connections import (  # noqa: F401 - http_parser: every test with each parser
    CONTROL,
    TOKEN,
    WAIT_S,
    connect,
    http_parser,
    live_agent,
)

#: The agent's default max_request_bytes.
LIMIT = 65536
BODY_BYTES = 200 * 1024 * 1024
CHUNK = b"x" * 65536


def read_answer(sock: socket.socket) -> bytes:
    """Everything the agent sends until it closes (a reset after the answer ends it too)."""
    sock.settimeout(WAIT_S)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


def status_of(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


def test_a_100kb_header_in_one_packet_is_refused(tmp_path: Path) -> None:
    with live_agent(tmp_path) as (_, port), connect(port) as sock:
        big = "a" * (100 * 1024)
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: agent\r\nX-Big: {big}\r\n\r\n".encode())
        answer = read_answer(sock)
        assert status_of(answer) == 431
        assert b"connection: close" in answer.lower()


def test_a_header_that_trickles_past_the_limit_is_refused(tmp_path: Path) -> None:
    with live_agent(tmp_path) as (_, port), connect(port) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: agent\r\n")
        line = b"X-Pad: " + b"p" * 4000 + b"\r\n"
        for _ in range(4 * LIMIT // len(line)):
            if select.select([sock], [], [], 0)[0]:
                break
            try:
                sock.sendall(line)
            except (BrokenPipeError, ConnectionResetError):
                break
        # The agent's own count answers (431), not the HTTP parser's buffer limit (400, "Invalid HTTP request").
        assert status_of(read_answer(sock)) == 431


def test_a_200mb_chunked_acknowledgement_is_stopped_early(tmp_path: Path) -> None:
    with live_agent(tmp_path) as (_, port), connect(port) as sock:
        sock.sendall(f"POST /v1/alarms/some-alarm/ack HTTP/1.1\r\nHost: agent\r\n"
                     f"Authorization: Bearer {CONTROL}\r\nContent-Type: application/json\r\n"
                     f"Transfer-Encoding: chunked\r\n\r\n".encode())
        framed = f"{len(CHUNK):x}\r\n".encode() + CHUNK + b"\r\n"
        sent = 0
        answer = b""
        sock.setblocking(False)
        while sent < BODY_BYTES:
            readable, writable, _ = select.select([sock], [sock], [], WAIT_S)
            if readable:
                break
            if writable:
                try:
                    sent += sock.send(framed)
                except BlockingIOError:
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    break
        sock.setblocking(True)
        answer = read_answer(sock)
        # The agent answered (and stopped reading) long before the body ended.
        assert sent < BODY_BYTES // 4, f"sent {sent} bytes before the agent answered"
        assert status_of(answer) == 413, answer[:300]
        assert b"over 65536 bytes" in answer


def test_a_declared_length_over_the_limit_is_refused_before_the_body(tmp_path: Path) -> None:
    with live_agent(tmp_path) as (_, port), connect(port) as sock:
        sock.sendall(f"POST /v1/alarms/some-alarm/ack HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer {CONTROL}\r\n"
                     f"Content-Length: {BODY_BYTES}\r\n\r\n".encode())
        answer = read_answer(sock)
        assert status_of(answer) == 413
        assert b"connection: close" in answer.lower()


def test_two_authorization_headers_are_refused(tmp_path: Path) -> None:
    with live_agent(tmp_path) as (_, port), connect(port) as sock:
        sock.sendall(f"GET /v1/info HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer wrong\r\n"
                     f"Authorization: Bearer {TOKEN}\r\n\r\n".encode())
        answer = read_answer(sock)
        assert status_of(answer) == 400
        assert b"more than one Authorization header" in answer


def test_an_ordinary_client_posting_too_much_reads_the_413(tmp_path: Path) -> None:
    # httpx sends head and body at once; the agent answers before reading the body and closes,
    # lingering so that the client's body in flight does not reset the answer away.
    import httpx

    with live_agent(tmp_path) as (_, port), httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=WAIT_S) as http:
        for _ in range(5):
            r = http.post("/v1/alarms/some-alarm/ack", headers={"Authorization": f"Bearer {CONTROL}"},
                          content=b"{" + b" " * (128 * LIMIT) + b"}")
            assert r.status_code == 413 and "over 65536 bytes" in r.json()["error"]


@pytest.mark.parametrize("http_parser", ["httptools"], indirect=True)
def test_a_pipelined_head_behind_a_stream_cannot_grow_past_the_limit(tmp_path: Path, http_parser: str) -> None:
    # httptools parses a pipelined request as it arrives (h11 leaves it unparsed and stops reading
    # until the answer before it is complete): a head trickling in behind an event stream must
    # not grow without bound while the stream is served. The agent closes that connection.
    with live_agent(tmp_path) as (_, port), connect(port) as sock:
        sock.settimeout(WAIT_S)
        sock.sendall(f"GET /v1/stream HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode())
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: agent\r\n")
        line = b"X-Pad: " + b"p" * 4000 + b"\r\n"
        closed = False
        for _ in range(8 * LIMIT // len(line)):
            try:
                sock.sendall(line)
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
        deadline = time.monotonic() + WAIT_S
        while not closed and time.monotonic() < deadline:
            # The stream's frames until the agent closes the connection.
            try:
                closed = sock.recv(65536) == b""
            except ConnectionResetError:
                closed = True
        assert closed
