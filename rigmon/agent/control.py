"""Control requests' shared rules: who may send them (the control token) and what text they may carry.

Acknowledgements (``POST /v1/alarms/{id}/ack``), marks (``POST /v1/marks``) and guard commands
(``POST /v1/guard``) all check the control token the same way and refuse the same characters
in the text they store and every dashboard shows. The token is checked before anything else: a
feature switched off answers 404 only to the control token, so a client without it does not learn
which features an agent has.
"""

from __future__ import annotations

import codecs
import hmac
import json

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from rigmon.lazy_re import lazy_compile

#: Longest operator name kept with an acknowledgement (and a mark).
MAX_ACK_BY_CHARS = 100
#: Longest text of a mark (POST /v1/marks), in characters.
MAX_MARK_CHARS = 200
#: Characters refused in a control request's text (``by``, a mark): C0 controls (tab and newlines
#: too), DEL, C1 controls, the line and paragraph separators and the bidi embeddings, overrides
#: and isolates (U+202A-U+202E, U+2066-U+2069). The text is shown on every operator's terminal:
#: an ``ESC]0;...BEL`` there retitles the window, OSC 52 writes the clipboard.
UNSAFE_BY = lazy_compile("[\x00-\x1f\x7f-\x9f\u2028-\u202e\u2066-\u2069]")
#: A lone UTF-16 surrogate (U+D800-U+DFFF): JSON may spell one (``"\\ud800"``) and json.loads takes it,
#: but no UTF-8 can carry it, so every frame, journal write and answer holding it would fail to encode.
SURROGATE = lazy_compile("[\ud800-\udfff]")


class BadRequest(Exception):
    """A query parameter, header or body the API cannot use; answered with 400 and the reason."""


def _error(status: int, reason: str) -> JSONResponse:
    return JSONResponse({"error": reason}, status_code=status)


def checked_text(text: str, limit: int = MAX_MARK_CHARS, what: str = "text") -> str:
    """Text of a control request (a mark, a ``by``), checked: stripped, not empty, at most ``limit`` characters, no control characters.

    Raises:
        BadRequest: naming what is wrong.
    """
    text = text.strip()
    if not text:
        raise BadRequest(f"{what} is empty")
    if len(text) > limit:
        raise BadRequest(f"{what} is {len(text)} characters; at most {limit}")
    bad = UNSAFE_BY.search(text)
    if bad is not None:
        raise BadRequest(f"{what} holds a control or bidi character (U+{ord(bad.group()):04X} at position "
                         f"{bad.start()}); send plain text")
    bad = SURROGATE.search(text)
    if bad is not None:
        raise BadRequest(f"{what} holds a lone surrogate (U+{ord(bad.group()):04X} at position {bad.start()}), "
                         "which is not Unicode text; send UTF-8")
    return text


def json_body(body: bytes, example: str) -> object:
    """The JSON value of a control request's body; ``None`` for an empty body.

    JSON between systems is UTF-8 (RFC 8259, section 8.1; a leading byte order mark is skipped).
    A body in another encoding (Latin-1 from a shell in a legacy locale, UTF-16) is refused as
    such, not as "not JSON": its JSON may be fine.

    Args:
        body: the request's bytes.
        example: a valid body, quoted in the reason when the body is not JSON.

    Raises:
        BadRequest: the body is not UTF-8 (the first bad byte and its offset), or not JSON.
    """
    if not body:
        return None
    skip = len(codecs.BOM_UTF8) if body.startswith(codecs.BOM_UTF8) else 0
    try:
        text = body[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = skip + exc.start
        raise BadRequest(f"body is not UTF-8 (byte 0x{body[at]:02x} at offset {at}); send the JSON in UTF-8") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise BadRequest(f"body must be JSON, e.g. {example}") from None


def control_denied(control_token: str | None, token: str | None, request: Request, what: str) -> Response | None:
    """The answer refusing a control request (``what``: "acknowledge alarms"), or ``None`` when it
    carries ``control_token``; 403 when the agent has none or the read token ``token`` was sent."""
    if control_token is None:
        return _error(403, "this agent is read-only: no control token is configured")
    given = request.headers.get("authorization", "").encode()
    if hmac.compare_digest(given, f"Bearer {control_token}".encode()):
        return None
    if token is not None and hmac.compare_digest(given, f"Bearer {token}".encode()):
        return _error(403, f"the read token cannot {what}: use the control token")
    response = _error(401, "missing or wrong control token")
    response.headers["WWW-Authenticate"] = 'Bearer realm="rigmon-control"'
    return response
