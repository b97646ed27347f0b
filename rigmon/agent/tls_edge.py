"""The agent's TLS port before its handshake: a plain HTTP request answered in plain HTTP, silent ends counted.

asyncio hands the bytes of a TLS server's connection straight to OpenSSL, which refuses a plain HTTP
request by dropping the connection: ``curl http://node:9871/metrics`` said "empty reply from server" and
Prometheus with ``scheme: http`` said ``EOF``, and only the agent's log said why. nginx answers such a
request "400 The plain HTTP request was sent to HTTPS port"; here `TlsEdge` reads the first bytes of each
connection and, when they are an HTTP method, answers 400 in plain HTTP with the fix, then closes. Anything
else goes to the TLS handshake as it came.

It also sees handshakes that end without either side's TLS stack saying why: a client that leaves
mid-handshake without a TLS alert (asyncio's clients drop the alert of a certificate they refuse), one that
stalls until the handshake timeout, one that sent bytes that are neither TLS nor HTTP. OpenSSL raises
nothing for these, so they were not counted (`rigmon.agent.tls_files.HandshakeFaults` counts what it raises).
"""

from __future__ import annotations

import asyncio
import enum
from asyncio.sslproto import SSLProtocol
from collections.abc import Callable
from ssl import SSLContext
from typing import Protocol, cast

from rigmon.agent.client_faults import (
    PLAIN_HTTP_TO_TLS,
    TLS_HANDSHAKE_RECORD,
    FaultCounter,
)
from rigmon.agent.lingering import LINGER_S

#: Request methods whose token starts a plain HTTP request (RFC 9110's, and PATCH).
HTTP_METHODS = (b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"CONNECT", b"OPTIONS", b"TRACE", b"PATCH")
#: Most bytes held before the first ones say HTTP or not: the longest method token and its space.
MAX_SNIFF_BYTES = max(len(m) for m in HTTP_METHODS) + 1
#: Most bytes of a plain HTTP request read (and dropped) after its answer; more, and the connection is closed.
MAX_DRAINED_BYTES = 64 * 1024
#: The answer to a plain HTTP request: what the client sees instead of a dropped connection. JSON, as every
#: answer of the agent (a dashboard shows its ``error``), and words curl prints as they are.
PLAIN_HTTP_BODY = (b'{"error": "this agent serves HTTPS, and this request came in plain HTTP: use an https:// URL '
                   b'(Prometheus: scheme: https, with a tls_config ca_file naming the agent\'s certificate)"}\n')
PLAIN_HTTP_ANSWER = (b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close\r\n"
                     b"content-length: " + str(len(PLAIN_HTTP_BODY)).encode() + b"\r\n\r\n" + PLAIN_HTTP_BODY)

class Unalerted(enum.StrEnum):
    """How a TLS handshake ended that neither OpenSSL nor a TLS alert reported (the kinds of failure counted)."""

    #: The client began a TLS handshake and closed (or reset) the connection before it was complete.
    LEFT = "LEFT_DURING_HANDSHAKE"
    #: The client began a TLS handshake and did not complete it within the handshake timeout.
    TIMED_OUT = "HANDSHAKE_TIMED_OUT"
    #: The client sent bytes that are neither a TLS handshake nor an HTTP request, and left or stalled.
    NOT_TLS = "NOT_TLS"


class HandshakeWatch(Protocol):
    """What counts a TLS server's failed handshakes: `rigmon.agent.tls_files.HandshakeFaults`."""

    def watch(self, context: SSLContext) -> None:
        """Count the failures OpenSSL raises in the handshakes of ``context`` from now on."""

    def note_unalerted(self, kind: Unalerted) -> None:
        """A handshake ended as ``kind`` says, with no TLS alert and nothing raised by OpenSSL."""


def plain_http(first: bytes) -> bool | None:
    """Whether the first bytes of a connection begin a plain HTTP request.

    Args:
        first: the bytes received so far (at least one).

    Returns:
        True for a method token and its space (``GET ``), False for bytes no request starts with (a TLS
        record starts with byte 22), None for a beginning of a method token (more bytes will say).
    """
    for method in HTTP_METHODS:
        token = method + b" "
        if first.startswith(token):
            return True
        if token.startswith(first):
            return None
    return False


class _Stage(enum.Enum):
    SNIFFING = enum.auto()
    TLS = enum.auto()
    ANSWERED = enum.auto()
    CLOSED = enum.auto()


class TlsEdge(asyncio.Protocol):
    """The protocol of one connection to the agent's TLS port until its handshake is complete.

    The connection's TLS (asyncio's `SSLProtocol`, as ``create_server(ssl=...)`` makes it, handshake timeout
    and all) starts at once; the first bytes are held (`MAX_SNIFF_BYTES` at most) until they say whether they
    begin a plain HTTP request. Those are answered `PLAIN_HTTP_ANSWER` and the connection closes (after the
    client closes its side, `MAX_DRAINED_BYTES` or `LINGER_S`, so the request still in flight does not make the
    kernel reset the connection before the client reads the answer). Any other bytes go to the TLS protocol;
    once the handshake is complete the connection is the TLS protocol's alone.

    Args:
        loop: the server's event loop.
        app_protocol: the HTTP protocol that serves the connection once the handshake is complete.
        context: the server's TLS context.
        handshake_timeout_s: seconds the client has, from connecting, to complete its handshake (None:
            asyncio's default); it bounds the sniffing and the answered connection too.
        client_faults: counts a plain HTTP request (`PLAIN_HTTP_TO_TLS`), as the plain-HTTP agent counts
            a TLS handshake (None: not counted).
        unalerted: counts handshakes that ended unreported (`Unalerted`; None: not counted).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, app_protocol: asyncio.BaseProtocol, context: SSLContext,
                 handshake_timeout_s: float | None = None, client_faults: FaultCounter | None = None,
                 unalerted: HandshakeWatch | None = None) -> None:
        self._loop = loop
        self._client_faults = client_faults
        self._unalerted = unalerted
        self._handshake: asyncio.Future[None] = loop.create_future()
        self._handshake.add_done_callback(self._handshake_done)
        # typeshed has the timeout an int; asyncio takes any positive number of seconds.
        self._tls = SSLProtocol(loop, app_protocol, context, self._handshake, server_side=True,
                                ssl_handshake_timeout=handshake_timeout_s)  # type: ignore[arg-type]
        self._transport: asyncio.Transport | None = None
        self._stage = _Stage.SNIFFING
        self._held = b""
        #: The first byte sent was a TLS record's (a handshake record: `TLS_HANDSHAKE_RECORD`).
        self._began_with_tls = False
        self._drained = 0
        self._linger: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # a stream server's: a socket transport
        self._tls.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._stage is _Stage.TLS:
            self._feed(data)
        elif self._stage is _Stage.SNIFFING:
            self._sniff(data)
        elif self._stage is _Stage.ANSWERED:
            self._drained += len(data)
            if self._drained > MAX_DRAINED_BYTES and self._transport is not None:
                self._transport.close()

    def eof_received(self) -> bool | None:
        if self._stage is _Stage.ANSWERED:
            return None  # the client has read the answer and closed: the transport closes
        self._note_unreported(None)
        # True keeps the connection open (typeshed has it return None): a paused reader's data is still unread.
        keep_open: bool | None = self._tls.eof_received()  # type: ignore[func-returns-value]
        return keep_open

    def connection_lost(self, exc: Exception | None) -> None:
        if self._stage is not _Stage.ANSWERED:
            self._note_unreported(exc)
        self._stage = _Stage.CLOSED
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        self._tls.connection_lost(exc)
        self._transport = None

    def pause_writing(self) -> None:
        if self._stage is not _Stage.ANSWERED:
            self._tls.pause_writing()

    def resume_writing(self) -> None:
        if self._stage is not _Stage.ANSWERED:
            self._tls.resume_writing()

    def _sniff(self, data: bytes) -> None:
        held = self._held + data
        verdict = plain_http(held[:MAX_SNIFF_BYTES])
        if verdict is None:
            self._held = held  # a beginning of a method token: fewer than MAX_SNIFF_BYTES
            return
        self._held = b""
        if verdict:
            self._answer_plain_http()
            return
        self._stage = _Stage.TLS
        self._began_with_tls = held[:1] == TLS_HANDSHAKE_RECORD[:1]
        self._feed(held)

    def _feed(self, data: bytes) -> None:
        """Hand ``data`` to the TLS protocol (a buffered protocol: it reads into its own buffer)."""
        view = memoryview(data)
        while view and self._transport is not None and not self._transport.is_closing():
            buffer = self._tls.get_buffer(len(view))
            size = min(len(buffer), len(view))
            buffer[:size] = view[:size]
            self._tls.buffer_updated(size)
            view = view[size:]

    def _answer_plain_http(self) -> None:
        transport = self._transport
        assert transport is not None
        self._stage = _Stage.ANSWERED
        if self._client_faults is not None:
            host = (transport.get_extra_info("peername") or ("",))[0]
            self._client_faults.note_client_fault(f"{PLAIN_HTTP_TO_TLS}, answered 400,", str(host), self._loop.time())
        transport.write(PLAIN_HTTP_ANSWER)
        if not transport.can_write_eof():
            transport.close()
            return
        transport.write_eof()
        self._linger = self._loop.call_later(LINGER_S, transport.close)

    def _note_unreported(self, exc: Exception | None) -> None:
        """The connection ends (``exc``: how, None for the client's close): count a handshake it left unended."""
        if self._unalerted is None or self._handshake.done() or self._stage is _Stage.CLOSED:
            return
        if self._stage is _Stage.SNIFFING and not self._held:
            return  # not a byte sent: a port probe, not a handshake
        if self._stage is _Stage.SNIFFING or not self._began_with_tls:
            kind = Unalerted.NOT_TLS
        elif isinstance(exc, ConnectionAbortedError):
            kind = Unalerted.TIMED_OUT  # asyncio's handshake timeout aborts the connection with it
        else:
            kind = Unalerted.LEFT
        self._stage = _Stage.CLOSED
        self._unalerted.note_unalerted(kind)

    def _handshake_done(self, handshake: asyncio.Future[None]) -> None:
        """The handshake is over: on success the TLS protocol reads the connection itself from now on."""
        if handshake.cancelled() or handshake.exception() is not None:
            return
        transport = self._transport
        if self._stage is _Stage.TLS and transport is not None and not transport.is_closing():
            transport.set_protocol(self._tls)


def tls_edge_factory(app_factory: Callable[[], asyncio.BaseProtocol], context: SSLContext,
                     handshake_timeout_s: float | None = None, client_faults: FaultCounter | None = None,
                     unalerted: HandshakeWatch | None = None) -> Callable[[], TlsEdge]:
    """A protocol factory for ``loop.create_server`` (without ``ssl``) that serves TLS through `TlsEdge`.

    Args:
        app_factory: the HTTP protocol's factory (what ``create_server(ssl=context)`` would be given).
        context, handshake_timeout_s, client_faults, unalerted: as `TlsEdge` takes them.
    """

    def edge() -> TlsEdge:
        loop = asyncio.get_running_loop()
        return TlsEdge(loop, app_factory(), context, handshake_timeout_s, client_faults, unalerted)

    return edge
