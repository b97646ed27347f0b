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
    attempts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

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
def receiver(fail_first: int = 0, fail_status: int = 500) -> Iterator[Receiver]:
    rec = Receiver(url="", fail_first=fail_first, fail_status=fail_status)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with rec.lock:
                rec.attempts += 1
                failing = rec.attempts <= rec.fail_first
                if not failing:
                    rec.requests.append(Received(self.path, dict(self.headers.items()), body, time.perf_counter()))
            self.send_response(rec.fail_status if failing else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    rec.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()
