"""``/v1/guard``: the guard's state (GET, read token) and the operator's hold/release (POST, control token)."""

from __future__ import annotations

import hmac
import json

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rigmon.agent.guard.service import GuardCommand, GuardService
from rigmon.schema import encode

#: Longest operator name kept with a command.
MAX_BY_CHARS = 64
PATH = "/v1/guard"


def _error(status: int, reason: str) -> JSONResponse:
    return JSONResponse({"error": reason}, status_code=status)


def guard_routes(service: GuardService | None, control_token: str | None, token: str | None) -> list[Route]:
    """The routes of ``/v1/guard`` (404 answers when the guard is not enabled on this agent)."""

    async def get(request: Request) -> Response:
        if service is None:
            return _error(404, "the guard is not enabled on this agent ([guard] enabled = false)")
        return Response(encode(service.reading()), media_type="application/json")

    async def post(request: Request) -> Response:
        if service is None:
            return _error(404, "the guard is not enabled on this agent ([guard] enabled = false)")
        if control_token is None:
            return _error(403, "this agent is read-only: no control token is configured")
        given = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, f"Bearer {control_token}".encode()):
            if token is not None and hmac.compare_digest(given, f"Bearer {token}".encode()):
                return _error(403, "the read token cannot command the guard: use the control token")
            response = _error(401, "missing or wrong control token")
            response.headers["WWW-Authenticate"] = 'Bearer realm="rigmon-control"'
            return response
        try:
            data = json.loads(await request.body() or b"null")
        except (ValueError, RecursionError):
            data = None
        if not isinstance(data, dict) or data.get("action") not in ("hold", "release") \
                or not isinstance(data.get("by", ""), str):
            return _error(400, 'body must be {"action": "hold" | "release", "by": "name"}')
        action: GuardCommand = "hold" if data["action"] == "hold" else "release"
        by = (data.get("by") or "operator")[:MAX_BY_CHARS]
        return Response(encode(service.command(action, by)), media_type="application/json")

    async def dispatch(request: Request) -> Response:
        return await (post(request) if request.method == "POST" else get(request))

    return [Route(PATH, dispatch, methods=["GET", "POST"])]
