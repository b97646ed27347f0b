"""A real HTTP receiver on 127.0.0.1 that records requests and can fail the first N."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    url: str
    requests: list[Received] = field(default_factory=list)
    fail_first: int = 0
    fail_status: int = 500
    fail_headers: dict[str, str] = field(default_factory=dict)
    fail_body: bytes = b""
    hang_first: int = 0
    attempts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Set when a request is being held (``hang_first``); the test ends the hang with ``release``.
    hanging: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def ok(self) -> list[Received]:
        with self.lock:
            return list(self.requests)


def wait_until(check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.005)


@contextmanager
def receiver(fail_first: int = 0, fail_status: int = 500, fail_headers: dict[str, str] | None = None,
             hang_first: int = 0, port: int = 0, fail_body: bytes = b"") -> Iterator[Receiver]:
    """Answers 200, or ``fail_status`` (with ``fail_headers`` and ``fail_body``) to the first ``fail_first``
    requests; the first ``hang_first`` requests get no answer at all until ``release``."""
    rec = Receiver(url="", fail_first=fail_first, fail_status=fail_status, fail_headers=dict(fail_headers or {}),
                   fail_body=fail_body, hang_first=hang_first)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with rec.lock:
                rec.attempts += 1
                hang = rec.attempts <= rec.hang_first
                failing = not hang and rec.attempts - rec.hang_first <= rec.fail_first
                if not failing and not hang:
                    rec.requests.append(Received(self.path, dict(self.headers.items()), body, time.perf_counter()))
            if hang:
                rec.hanging.set()
                rec.release.wait(10)
                return
            self.send_response(rec.fail_status if failing else 200)
            for name, value in (rec.fail_headers if failing else {}).items():
                self.send_header(name, value)
            body = rec.fail_body if failing else b""
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    rec.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        rec.release.set()
        server.shutdown()
        server.server_close()
