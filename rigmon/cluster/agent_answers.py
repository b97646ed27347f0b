"""Reading an agent's HTTP answers safely: size and line bounds, operator-facing failure reasons, schema checks.

Every failure becomes an `AgentError` whose reason is cleaned of terminal control characters,
since it may quote the agent.
"""

from __future__ import annotations

import json
import os
import re
import socket
import ssl
from collections.abc import AsyncIterator

import httpx

from rigmon.cluster.sanitise import clean_text
from rigmon.schema import SCHEMA_VERSION, Frame, SchemaError
from rigmon.summary import SummaryRecord

#: Largest answer read from an agent (a full /v1/samples page of big frames is a few MB); a
#: broken or hostile peer sending more is dropped, not buffered.
MAX_ANSWER_BYTES = 64 * 1024 * 1024
#: Longest line of the event stream (one frame is one line).
MAX_EVENT_LINE_BYTES = 16 * 1024 * 1024


class AgentError(Exception):
    """A request to the agent failed; ``reason`` is shown to the operator.

    The reason may quote the agent (an error body, a status line, a malformed value), so it
    is cleaned of terminal control characters here.
    """

    def __init__(self, reason: str, status: int | None = None) -> None:
        reason = clean_text(reason)
        super().__init__(reason)
        self.reason = reason
        self.status = status


def failure_reason(exc: Exception) -> str:
    """A short operator-facing reason for a failed request."""
    if isinstance(exc, httpx.ConnectTimeout):
        return "connect timed out"
    if isinstance(exc, httpx.ReadTimeout):
        return "timed out waiting for data"
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect: {_socket_cause(exc) or 'connection failed'}"
    if isinstance(exc, httpx.RemoteProtocolError) and str(exc).startswith(_PEER_CLOSED):
        # An agent that stops (systemctl stop, Ctrl-C, a reboot) closes its open streams mid-answer.
        return "agent stopped the connection"
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
        # httpx's own text may be empty (a reset is ReadError('')): the socket error under it says more.
        return f"connection lost: {_socket_cause(exc) or type(exc).__name__}"
    return f"{type(exc).__name__}: {exc}"


#: How httpx says the agent closed the connection before its answer was whole (h11, httpcore).
_PEER_CLOSED = ("peer closed connection", "Server disconnected")


def _socket_cause(exc: httpx.TransportError) -> str:
    """Why a connection failed or broke, in lower case (``connection refused``, ``connection reset by
    peer``): the socket error under httpx's (anyio says only ``All connection attempts failed``), else
    httpx's own text (may be empty)."""
    seen: set[int] = set()
    inner: BaseException | None = exc
    while inner is not None and id(inner) not in seen:
        seen.add(id(inner))
        # A TLS failure is an OSError too, but its errno is OpenSSL's, not the system's.
        if isinstance(inner, OSError) and not isinstance(inner, ssl.SSLError):
            if isinstance(inner, socket.gaierror) and inner.strerror:
                return _lower_first(inner.strerror)
            if inner.errno is not None and inner.errno > 0:
                return _lower_first(os.strerror(inner.errno))
        inner = inner.__cause__ or inner.__context__
    return _lower_first(str(exc).split("] ", 1)[-1])


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def status_error(response: httpx.Response, body: bytes) -> AgentError:
    """The `AgentError` for a non-200 ``response`` whose body is ``body`` (the agent's ``error`` when it sent one)."""
    try:
        detail = str(json.loads(body)["error"])
    except (ValueError, KeyError, TypeError, RecursionError):
        detail = response.reason_phrase
    if response.status_code == 401:
        return AgentError(f"401 unauthorized: {detail}", 401)
    if response.status_code == 403:
        return AgentError(f"403 forbidden: {detail}", 403)
    return AgentError(f"HTTP {response.status_code}: {detail}", response.status_code)


_LINE_END = re.compile(r"\r\n|\r|\n")


async def read_bounded(response: httpx.Response, limit: int) -> bytes:
    """The body of a streamed ``response``, refusing more than ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise AgentError(f"answer larger than {limit // (1024 * 1024)} MB")
        chunks.append(chunk)
    return b"".join(chunks)


async def bounded_lines(response: httpx.Response, limit: int) -> AsyncIterator[str]:
    """Lines of a streamed text ``response`` (CR, LF or CRLF ends one), none longer than ``limit``."""
    parts: list[str] = []
    size = 0
    async for text in response.aiter_text():
        if not _LINE_END.search(text) and not (parts and parts[-1].endswith("\r")):
            # The middle of a long line: keep the piece, look at it again only once it ends.
            parts.append(text)
            size += len(text)
            if size > limit:
                raise AgentError(f"event stream line longer than {limit // (1024 * 1024)} MB")
            continue
        # Only CR, LF and CRLF end a line in an event stream (not str.splitlines' others).
        *lines, pending = _LINE_END.split("".join(parts) + text)
        if pending == "" and text.endswith("\r"):
            # A CR at the end of a chunk: its LF may open the next one.
            lines, pending = lines[:-1], lines[-1] + "\r"
        for line in lines:
            yield line
        parts, size = [pending], len(pending)
        if size > limit:
            raise AgentError(f"event stream line longer than {limit // (1024 * 1024)} MB")
    pending = "".join(parts)
    if pending:
        # An unterminated last line, or one whose CR ended the stream.
        yield pending.removesuffix("\r")


def check_frame(frame: Frame) -> Frame:
    """``frame``, if it speaks this client's schema version.

    Raises:
        SchemaError: another schema version.
    """
    if frame.schema != SCHEMA_VERSION:
        raise SchemaError(f"schema version {frame.schema}, this client speaks {SCHEMA_VERSION}")
    return frame


def check_record(record: SummaryRecord) -> SummaryRecord:
    """``record``, if its frame speaks this client's schema version (see `check_frame`)."""
    check_frame(record.frame)
    return record
