"""``/v1/guard``: the guard's state (GET, read token) and the operator's hold/release (POST, control token)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rigmon.agent.control import checked_text, control_denied, json_body
from rigmon.schema import encode

if TYPE_CHECKING:
    # Types only: the service (and NVML control beneath it) is imported where the guard is enabled.
    from rigmon.agent.guard.service import GuardCommand, GuardService

#: Longest operator name kept with a command.
MAX_BY_CHARS = 64
PATH = "/v1/guard"
#: A valid command, quoted when a body is not one.
BODY_EXAMPLE = '{"action": "hold" | "release", "by": "name"}'


def _error(status: int, reason: str) -> JSONResponse:
    return JSONResponse({"error": reason}, status_code=status)


def guard_routes(service: GuardService | None, control_token: str | None, token: str | None) -> list[Route]:
    """The routes of ``/v1/guard`` (404 answers when the guard is not enabled on this agent; to a
    command, only once it carries the control token)."""

    async def get(request: Request) -> Response:
        if service is None:
            return _error(404, "the guard is not enabled on this agent ([guard] enabled = false)")
        return Response(encode(service.reading()), media_type="application/json")

    async def post(request: Request) -> Response:
        # The token first: a client without it must not learn whether the guard is enabled (404).
        denied = control_denied(control_token, token, request, "command the guard")
        if denied is not None:
            return denied
        if service is None:
            return _error(404, "the guard is not enabled on this agent ([guard] enabled = false)")
        # A body not in UTF-8 is refused as such (which byte, where), not as a bad command.
        data = json_body(await request.body(), BODY_EXAMPLE)
        if not isinstance(data, dict) or data.get("action") not in ("hold", "release") \
                or not isinstance(data.get("by", ""), str):
            return _error(400, f"body must be {BODY_EXAMPLE}")
        action: GuardCommand = "hold" if data["action"] == "hold" else "release"
        # Shown on every dashboard and kept in the journal: text only, as an acknowledgement's by.
        by = checked_text((data.get("by") or "operator")[:MAX_BY_CHARS], MAX_BY_CHARS, "by")
        return Response(encode(service.command(action, by)), media_type="application/json")

    async def dispatch(request: Request) -> Response:
        return await (post(request) if request.method == "POST" else get(request))

    return [Route(PATH, dispatch, methods=["GET", "POST"])]
