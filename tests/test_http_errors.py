"""Failed requests to an agent become one sentence with the fix."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import httpx
import pytest

from rigmon.http_errors import describe_http_error
from tests.ports import free_port as free_port


def failure(status: int, body: bytes = b"", headers: dict[str, str] | None = None,
            token: str | None = None) -> str:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body, headers=headers)

    auth = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(transport=httpx.MockTransport(handler), headers=auth) as client:
        with pytest.raises(httpx.HTTPStatusError) as info:
            client.get("http://rig1:9871/v1/info").raise_for_status()
    return describe_http_error(info.value)


def test_status_answers() -> None:
    assert failure(401) == ("401: this agent needs a token: --token-file FILE "
                            "(the node's read token, e.g. /etc/rigmon/read.token)")
    assert failure(401, token="wrong").startswith("401: http://rig1:9871 refused the token: check that --token-file")
    assert "acknowledging needs the agent's control token" in failure(403, b'{"error": "read-only agent"}')
    assert "read-only agent" in failure(403, b'{"error": "read-only agent"}')
    assert failure(404, b'{"error": "not found"}') == "404: http://rig1:9871/v1/info: not found (is it a rigmon agent?)"
    assert failure(429, headers={"Retry-After": "3"}) == "429: http://rig1:9871 is rate-limiting this client; retry in 3 s"
    assert "journal is closed" in failure(503, b'{"error": "journal is closed"}')
    assert failure(500).startswith("500: http://rig1:9871 failed on this request")
    for text in (failure(401), failure(500), failure(429)):
        assert "developer.mozilla.org" not in text and "\n" not in text



def error_of(url: str, **client: object) -> str:
    with pytest.raises(httpx.HTTPError) as info:
        httpx.get(url, timeout=2, **client)  # type: ignore[arg-type]
    return describe_http_error(info.value)


def test_connection_refused_names_the_address() -> None:
    port = free_port()
    assert error_of(f"http://127.0.0.1:{port}/v1/info").startswith(
        f"connection refused: no agent is listening at http://127.0.0.1:{port}")


@pytest.fixture
def plain_http_server() -> Iterator[int]:
    """A socket that answers every connection with a plain HTTP response."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join(2)
        server.close()


def test_https_to_a_plain_agent_says_use_http(plain_http_server: int) -> None:
    text = error_of(f"https://127.0.0.1:{plain_http_server}/v1/info")
    assert text == f"TLS: https://127.0.0.1:{plain_http_server} does not speak HTTPS; use http:// for this agent"


def test_timeouts_and_unknown_hosts() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()  # accepts, never answers
    try:
        port = server.getsockname()[1]
        with pytest.raises(httpx.HTTPError) as info:
            httpx.get(f"http://127.0.0.1:{port}/", timeout=0.3)
        assert describe_http_error(info.value) == (f"timed out talking to http://127.0.0.1:{port}: "
                                                   "the agent or the network is not answering")
    finally:
        server.close()
    text = error_of("http://no-such-host.invalid:9871/")
    assert text.startswith("cannot resolve the host name no-such-host.invalid")


def test_a_refused_token_names_where_it_was_given() -> None:
    # Before: "--token-file FILE" whatever gave the token (a dashboard's token_file in dash.toml too).
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": "missing or wrong bearer token"})

    with (httpx.Client(transport=httpx.MockTransport(handler), headers={"Authorization": "Bearer x"}) as client,
          pytest.raises(httpx.HTTPStatusError) as info):
        client.get("http://rig1:9871/v1/info").raise_for_status()
    where = "/home/op/.config/rigmon/dash.toml: nodes[0].token_file (node http://rig1:9871)"
    assert describe_http_error(info.value, where) == (
        f"401: http://rig1:9871 refused the token: check that {where} holds this agent's read token")
    assert "--token-file FILE" in describe_http_error(info.value)
