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
    """A short operator-facing reason for a failed request: what went wrong in plain words (never
    a Python class name), then httpx's or the socket's own detail where it says more."""
    if isinstance(exc, httpx.TimeoutException):
        return _TIMEOUTS.get(type(exc), "timed out")
    tls = _tls_failure(exc)
    if tls is not None:
        return tls
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect: {_socket_cause(exc) or 'connection failed'}"
    if isinstance(exc, httpx.RemoteProtocolError) and str(exc).startswith(_PEER_CLOSED):
        # An agent that stops (systemctl stop, Ctrl-C, a reboot) closes its open streams mid-answer.
        return "agent stopped the connection"
    if isinstance(exc, httpx.ReadError):
        # httpx's own text may be empty (a reset is ReadError('')): the socket error under it says more.
        return f"connection lost: {_socket_cause(exc) or 'the connection broke while reading the answer'}"
    if isinstance(exc, httpx.WriteError):
        return f"connection lost: {_socket_cause(exc) or 'the connection broke while sending the request'}"
    for family, words in _FAMILIES:
        if isinstance(exc, family):
            detail = _detail(exc)
            return f"{words}: {detail}" if detail else words
    return f"request failed: {_detail(exc) or 'no detail given'}"


#: What each timeout waited for.
_TIMEOUTS: dict[type[Exception], str] = {
    httpx.ConnectTimeout: "connect timed out",
    httpx.ReadTimeout: "timed out waiting for data",
    httpx.WriteTimeout: "timed out sending the request",
    httpx.PoolTimeout: "timed out waiting for a free connection to the agent",
}
#: The other httpx failures in the operator's words, most particular first (httpx's text follows).
_FAMILIES: tuple[tuple[type[Exception], str], ...] = (
    (httpx.RemoteProtocolError, "protocol error: the answer is not valid HTTP (is a rigmon agent at this URL?)"),
    (httpx.LocalProtocolError, "protocol error: this dashboard could not send the request"),
    (httpx.CloseError, "connection lost while closing it"),
    (httpx.ProxyError, "proxy failed (HTTP_PROXY/HTTPS_PROXY/ALL_PROXY in the environment)"),
    (httpx.UnsupportedProtocol, "not an http:// or https:// URL"),
    (httpx.NetworkError, "network error"),
    (httpx.TooManyRedirects, "too many redirects (is the URL a rigmon agent's?)"),
    (httpx.DecodingError, "cannot decode the answer (its Content-Encoding or text is broken)"),
    (httpx.TransportError, "transport failed"),
    (httpx.InvalidURL, "not a valid URL"),
    (httpx.StreamError, "the answer's stream was read wrongly"),
    (httpx.HTTPError, "request failed"),
)


def _tls_failure(exc: Exception) -> str | None:
    """The TLS failure under ``exc`` in plain words (certificate not trusted, hostname mismatch, not
    HTTPS at all), with OpenSSL's detail; ``None`` when no TLS failure is under it."""
    seen: set[int] = set()
    inner: BaseException | None = exc
    while inner is not None and id(inner) not in seen:
        seen.add(id(inner))
        if isinstance(inner, ssl.SSLCertVerificationError):
            detail = _lower_first(inner.verify_message or str(inner))
            if inner.verify_code == _X509_HOSTNAME_MISMATCH:
                return f"TLS failure: hostname mismatch: {detail}"
            return f"TLS failure: certificate not trusted: {detail} (give the node's CA with ca_file / --ca-file)"
        if isinstance(inner, ssl.SSLError):
            if inner.reason in _NOT_TLS:
                return "TLS failure: the agent does not speak HTTPS (use http:// for it)"
            return f"TLS failure: {_lower_first(inner.reason or str(inner))}"
        inner = inner.__cause__ or inner.__context__
    return None


#: OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH: the certificate is valid, but for another name.
_X509_HOSTNAME_MISMATCH = 62
#: OpenSSL's reasons when what answered a TLS handshake was not TLS (plain HTTP, most often).
_NOT_TLS = frozenset({"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST"})


def _detail(exc: BaseException) -> str:
    """httpx's own text of ``exc``, on one line (may be empty)."""
    return " ".join(str(exc).split())


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


#: Where a dashboard's read token is given, said by a 401 to a request that sent none when the
#: client was not told the node's own place (`rigmon.cluster.config.NodeTarget.token_where`).
TOKEN_WHERE = "as token_file in the node's [[nodes]] entry of the dashboard's dash.toml, or with rigmon dash --token-file FILE"


def status_error(response: httpx.Response, body: bytes, token_from: str | None = None,
                 token_where: str | None = None) -> AgentError:
    """The `AgentError` for a non-200 ``response`` whose body is ``body`` (the agent's ``error`` when it sent one).

    Args:
        token_from: where the read token sent was given (`rigmon.cluster.config.NodeTarget.token_from`):
            a 401 to a request that sent it says to check it there.
        token_where: where a read token for this agent would be given
            (`rigmon.cluster.config.NodeTarget.token_where`; default `TOKEN_WHERE`): a 401 to a request
            that sent none says that the agent wants one, and where to give it.
    """
    try:
        detail = str(json.loads(body)["error"])
    except (ValueError, KeyError, TypeError, RecursionError):
        detail = response.reason_phrase
    if response.status_code == 401:
        sent = response.request is not None and bool(response.request.headers.get("authorization"))
        if not sent:
            # Not a wrong token: none was given, and the operator needs to know where one goes.
            return AgentError(f"401 unauthorized: {detail}; no token was sent: give this agent's read token "
                              f"{token_where or TOKEN_WHERE}", 401)
        if token_from:
            return AgentError(f"401 unauthorized: {detail}; check that {token_from} holds this agent's read token", 401)
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
