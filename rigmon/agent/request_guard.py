"""The agent's request guard, in front of its Starlette app: rate limit, request size, bearer token.

It also answers the once-a-second ``GET /v1/latest`` pull itself, without Starlette's routing.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse

from rigmon.agent.frame_json import frame_json
from rigmon.agent.ratelimit import retry_after_header

if TYPE_CHECKING:
    from rigmon.agent.api import ApiState

log = logging.getLogger(__name__)

#: Seconds between warnings about requests refused for their token (a scanner must not flood the log).
TOKEN_REFUSAL_LOG_EVERY_S = 60.0
#: Most characters of a refused request's path shown in the log.
SHOWN_PATH_CHARS = 80

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class RequestTooLarge(Exception):
    """The request's headers and body, counted as they arrive, passed ``max_request_bytes``."""


def error_response(status: int, reason: str) -> JSONResponse:
    """The agent's JSON error answer: ``{"error": reason}``."""
    return JSONResponse({"error": reason}, status_code=status)


def closing_error_response(status: int, reason: str) -> JSONResponse:
    """An error after which the connection closes: the rest of the request is not read."""
    return JSONResponse({"error": reason}, status_code=status, headers={"connection": "close"})


def _is_control(scope: Scope) -> bool:
    path = str(scope.get("path", ""))
    if scope.get("method") != "POST":
        return False
    # The guard's hold/release checks the control token in its handler, as acknowledgements and marks do.
    return (path.startswith("/v1/alarms/") and path.endswith("/ack")) or path in ("/v1/marks", "/v1/guard")


def client_key(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def head_bytes(scope: Scope) -> int:
    """About how many bytes the request line and headers of ``scope`` took on the wire."""
    line = len(str(scope.get("method", ""))) + len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
    return line + 12 + sum(len(name) + len(value) + 4 for name, value in scope.get("headers") or [])


def counting_receive(receive: Receive, budget: int, limit: int) -> Receive:
    """``receive`` that raises `RequestTooLarge` once the body passes ``budget`` bytes.

    A chunked body has no length up front: it is counted as it arrives, so a client
    streaming 200 MB is stopped after ``budget`` bytes instead of being buffered whole.
    """
    seen = 0

    async def counted() -> MutableMapping[str, Any]:
        nonlocal seen
        message = await receive()
        if message.get("type") == "http.request":
            seen += len(message.get("body", b""))
            if seen > budget:
                raise RequestTooLarge(f"request over {limit} bytes (headers plus body)")
        return message

    return counted


def refusal_reason(given: bytes) -> str:
    """Why a request's ``Authorization`` header value ``given`` (``b""``: none) was refused, for the log.

    The header's value is never shown: a wrong token may be another node's, or the control token.
    """
    if not given:
        return "no Authorization header (it needs Authorization: Bearer TOKEN, TOKEN from the agent's token_file)"
    scheme = given.split(b" ", 1)[0]
    if scheme != b"Bearer":
        return "an Authorization header that is not 'Bearer TOKEN'"
    return "a bearer token that is not this agent's read token (check the client's token file against token_file)"


class TokenRefusals:
    """Counts requests refused 401; logs at most one warning a minute for each reason, naming the client and why.

    Without it a scraper with a wrong token (Prometheus shows only ``401 Unauthorized``) left nothing
    in the agent's log to tell which client or what was wrong with what it sent.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.refused = 0
        self._clock = clock
        #: When each reason was last logged: a client without a token does not hide one with a wrong token.
        self._last_log: dict[str, float] = {}

    def note(self, scope: Scope, given: bytes) -> None:
        """A request of ``scope`` was refused for its ``Authorization`` value ``given``."""
        self.refused += 1
        now = self._clock()
        reason = refusal_reason(given)
        if now - self._last_log.get(reason, float("-inf")) < TOKEN_REFUSAL_LOG_EVERY_S:
            return
        self._last_log[reason] = now
        path = str(scope.get("path", ""))[:SHOWN_PATH_CHARS]
        # The path is the client's text: escaped, so that it cannot write lines of its own to the log.
        shown = path.encode("unicode_escape").decode("ascii")
        log.warning("refused %s %s from %s (401): %s (%d refused since the start; at most one for each reason "
                    "is logged a minute)", scope.get("method", "?"), shown, client_key(scope), reason, self.refused)


def guard_requests(app: ASGIApp, state: ApiState, refusals: TokenRefusals | None = None) -> ASGIApp:
    """Wrap the app with a per-client rate limit, bearer-token auth and a request size limit.

    Args:
        refusals: where requests refused for their token are counted and logged (default: a new one).
    """
    expected = f"Bearer {state.token}".encode() if state.token else None
    refused = refusals if refusals is not None else TokenRefusals()
    limiter = state.rate_limiter
    limit = state.max_request_bytes

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        # Before auth, so guessing tokens is as slow as anything else; /healthz stays free for probes.
        if limiter is not None and scope.get("path") != "/healthz":
            wait_s = limiter.take(client_key(scope))
            if wait_s is not None:
                response = error_response(429, f"too many requests (limit {limiter.rate_per_s:g}/s, "
                                       f"burst {limiter.burst}); retry later")
                response.headers["Retry-After"] = retry_after_header(wait_s)
                await response(scope, receive, send)
                return
        head = head_bytes(scope)
        if head > limit:
            # A head can arrive whole in one packet, which the HTTP parser's own limit never sees.
            await closing_error_response(431, f"request headers over {limit} bytes")(scope, receive, send)
            return
        raw_headers = list(scope.get("headers") or [])
        if sum(1 for name, _ in raw_headers if name == b"authorization") > 1:
            await closing_error_response(400, "more than one Authorization header")(scope, receive, send)
            return
        headers = dict(raw_headers)
        length = headers.get(b"content-length", b"0")
        if not length.isdigit() or head + int(length) > limit:
            await closing_error_response(413, f"request over {limit} bytes (headers plus body)")(scope, receive, send)
            return
        receive = counting_receive(receive, limit - head, limit)
        # Acknowledgements carry the control token, checked by their handler.
        if expected is not None and scope.get("path") != "/healthz" and not _is_control(scope):
            given = headers.get(b"authorization", b"")
            # Constant-time comparison: the token must not leak through response timing.
            if not hmac.compare_digest(given, expected):
                refused.note(scope, given)
                response = error_response(401, "missing or wrong bearer token")
                response.headers["WWW-Authenticate"] = 'Bearer realm="rigmon"'
                await response(scope, receive, send)
                return
        if scope.get("path") == "/v1/latest" and scope.get("method") == "GET" and not scope.get("root_path"):
            # The pull that dashboards and scrapers make every second, answered here as the
            # route below answers it (same status, headers and bytes) without Starlette's
            # middleware, routing and request objects: most of the app's share of a request.
            frame = state.buffer.latest
            if frame is not None:
                body = frame_json(frame)
                await send({"type": "http.response.start", "status": 200,
                            "headers": [(b"content-length", str(len(body)).encode()),
                                        (b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded
