"""The dashboard's export of a node that wants a token it was not given says where the dashboard
takes one (dash.toml's ``[[nodes]] token_file``, ``rigmon dash --token-file``), as its live stream does,
not the ``--token-file`` option of ``rigmon snapshot``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rigmon.cluster.agent_answers import TOKEN_WHERE
from rigmon.cluster.config import NodeTarget
from rigmon.cluster.export import pull_targets


class _NeedsToken(BaseHTTPRequestHandler):
    """An agent that refuses every request without a token, as one with a read token does."""

    def do_GET(self) -> None:
        body = b'{"error": "this agent needs a token"}'
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def needs_token() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NeedsToken)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_an_export_refused_for_want_of_a_token_names_where_the_dashboard_takes_one(needs_token: str) -> None:
    """It said '401: this agent needs a token: --token-file FILE (...)', an option `rigmon dash` has
    only for every node at once, and not the node's own entry of dash.toml."""
    (part,) = asyncio.run(pull_targets([NodeTarget(url=needs_token)], 60.0))
    assert part.error is not None
    assert "--token-file FILE (the node's read token" not in part.error
    assert f"401: this agent needs a token: give its read token {TOKEN_WHERE}" in part.error


def test_the_node_entry_of_dash_toml_is_named_when_known(needs_token: str) -> None:
    where = f"in dash.toml: nodes[1].token_file (node {needs_token})"
    (part,) = asyncio.run(pull_targets([NodeTarget(url=needs_token, token_where=where)], 60.0))
    assert part.error is not None and f"give its read token {where}" in part.error
