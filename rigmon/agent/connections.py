"""Connection limits of the agent's HTTP server: time to a request head, per-address and total caps.

uvicorn closes an idle keep-alive connection, but never one that has not sent its first
request, and its ``limit_concurrency`` answers 503 to every new request while idle sockets
fill it. So 64 sockets that never send a byte took a node's agent off the air, ``/healthz``
included. Here every connection must deliver a complete request head within
``head_timeout_s`` of connecting (or of its previous answer), and a new connection that
would exceed the caps makes room by closing the longest-waiting connection that has not
sent a request head: idle sockets cannot lock out a dashboard that reconnects, and a
connection that is being served (an event stream, an answer) is never the one closed.

The guard (`GuardedConnection`) sits on uvicorn's httptools protocol (the C parser, a
dependency) and, when httptools is missing, on its h11 protocol; the limits are the same.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import hmac
import logging
import socket
import struct
import termios
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from rigmon.agent.client_faults import TLS_HANDSHAKE_RECORD, ClientFaultLog
from rigmon.agent.lingering import LingeringTransport

log = logging.getLogger(__name__)

#: Answer to a connection refused because every slot is busy serving requests.
_REFUSED = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
            b"connection: close\r\ncontent-length: 46\r\n\r\n"
            b'{"error": "too many connections; retry later"}')
#: Key of the request's `AnswerControl` in the ASGI scope's ``extensions``.
ANSWER_CONTROL = "rigmon.answer_control"
#: Seconds between warnings about refused connections.
REFUSAL_LOG_EVERY_S = 60.0
#: Most bytes one read hands to the protocol (asyncio's selector transport reads 256 KiB at most).
MAX_READ_BYTES = 256 * 1024
#: Answer to a request the HTTP parser cannot read (uvicorn's own is plain text; every answer of the API is JSON).
_MALFORMED_BODY = b'{"error": "malformed HTTP/1.1 request (request line or headers; a URL must be percent-encoded)"}'
_MALFORMED = (b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close\r\n"
              b"content-length: " + str(len(_MALFORMED_BODY)).encode() + b"\r\n\r\n" + _MALFORMED_BODY)


def h11_buffer_limit(max_head_bytes: int) -> int:
    """The HTTP parser's own limit on an incomplete head: above ours by one read, so ours answers first."""
    return max_head_bytes + MAX_READ_BYTES


def _too_large(limit: int) -> bytes:
    body = f'{{"error": "request headers over {limit} bytes"}}'.encode()
    return (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
            b"connection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


class ConnectionLimits(msgspec.Struct):
    """Limits shared by every connection of one server.

    Args:
        head_timeout_s: seconds a connection may take to deliver a complete request head,
            from connecting or from the end of its previous answer.
        max_per_client: connections one client address may hold at once.
        max_total: connections the server holds at once.
        max_head_bytes: largest request head; a connection that sent more without completing one
            is answered 431 and closed (a complete head is measured by the app's request guard,
            rigmon/agent/request_guard.py).
        tokens: bearer tokens (read and control) whose holders' connections are closed last.
    """

    head_timeout_s: float
    max_per_client: int
    max_total: int
    max_head_bytes: int = 65536
    tokens: tuple[str, ...] = ()
    #: Open connections in the order they were accepted.
    open: list[GuardedConnection] = msgspec.field(default_factory=list)
    #: Connections closed to make room, and connections refused, since the start (for tests and logs).
    evicted: int = 0
    refused: int = 0
    timed_out: int = 0
    #: Requests uvicorn's parser refused or could not serve (`CLIENT_FAULTS`), since the start.
    client_faults: int = 0
    _last_refusal_log: float = float("-inf")
    _last_fault_log: float = float("-inf")

    def authorised(self, headers: Iterable[tuple[bytes, bytes]]) -> bool:
        """Whether a request head carries one of the tokens (every request does when there is none)."""
        if not self.tokens:
            return True
        given = [value for name, value in headers if name.lower() == b"authorization"]
        if len(given) != 1:
            return False
        return any(hmac.compare_digest(given[0], f"Bearer {token}".encode()) for token in self.tokens)

    def admit(self, new: GuardedConnection) -> bool:
        """Make room for ``new`` (already accepted); ``False`` when it must be refused."""
        same = [c for c in self.open if c.client_host == new.client_host]
        if len(same) >= self.max_per_client and not self._evict(same):
            return False
        if len(self.open) >= self.max_total and not self._evict(self.open):
            return False
        self.open.append(new)
        return True

    def note_refusal(self, host: str, now: float) -> None:
        """Count a refused connection; log at most one warning a minute (a flood must not flood the log)."""
        self.refused += 1
        if now - self._last_refusal_log >= REFUSAL_LOG_EVERY_S:
            log.warning("refused a connection from %s: every connection slot is serving a request "
                        "(%d refused since the start)", host or "?", self.refused)
            self._last_refusal_log = now

    def note_client_fault(self, what: str, host: str, now: float) -> None:
        """Count a request the parser refused (``what``); log at most one warning a minute, like refusals."""
        self.client_faults += 1
        if now - self._last_fault_log >= REFUSAL_LOG_EVERY_S:
            count = self.client_faults
            log.warning("%s from %s (%d bad request%s (malformed, an upgrade, or the wrong scheme) since the start; "
                        "at most one is logged a minute)", what[0].upper() + what[1:], host or "?", count,
                        "" if count == 1 else "s")
            self._last_fault_log = now

    def forget(self, conn: GuardedConnection) -> None:
        """``conn`` is closed."""
        if conn in self.open:
            self.open.remove(conn)

    def _evict(self, candidates: list[GuardedConnection]) -> bool:
        # Waiting for a head, oldest first; connections that never made an authorised
        # request go before those of clients that did (a dashboard between two polls).
        waiting = [c for c in candidates if c.awaiting_head and not c.transport.is_closing()]
        if not waiting:
            return False
        victim = min(waiting, key=lambda c: (c.trusted, c.waiting_since))
        self.evicted += 1
        victim.close_idle("closed to make room for a new connection")
        self.forget(victim)
        return True


class AnswerControl:
    """What an answer may do to its connection beyond ASGI (``scope["extensions"][ANSWER_CONTROL]``).

    ASGI lets an application end a connection only by failing (uvicorn logs a traceback) or by
    returning before its answer is complete (uvicorn logs an error and closes, which waits for the
    unsent bytes: for ever when the client takes none). An answer its client stopped taking
    (`rigmon.agent.exports.SpooledResponse`) drops the connection here, unsent bytes and all.
    Holds its connection weakly: the scope that carries it is no part of a reference cycle.
    """

    __slots__ = ("_conn",)

    def __init__(self, conn: GuardedConnection) -> None:
        self._conn = weakref.ref(conn)

    def unsent_bytes(self) -> int:
        """Bytes written to the connection that its client has not taken yet (0 once it is gone).

        The transport's buffer and the socket's send queue (``SIOCOUTQ``: sent, not acknowledged):
        the buffer alone moves only when the kernel calls the socket writable again, after half
        its queue (megabytes on loopback) has gone, so a slow client that reads on looked stalled.
        """
        conn = self._conn()
        if conn is None or conn.transport.is_closing():
            return 0
        unsent = conn.transport.get_write_buffer_size()
        sock = conn.transport.get_extra_info("socket")
        if sock is not None:
            try:
                unsent += struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
            except (OSError, ValueError):
                pass  # gone meanwhile, or no TCP socket: the buffer alone
        return unsent

    def abort(self) -> None:
        """Drop the connection now: the client sees it reset, the application ``http.disconnect``."""
        conn = self._conn()
        if conn is None:
            return
        sock = conn.transport.get_extra_info("socket")
        if sock is not None:
            try:
                # A reset, not a close: a close would leave what the kernel holds of the answer
                # (megabytes on loopback) queued for a client that does not read, and that client
                # would then see an end, not a failure.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass  # already gone
        conn.lingering.abort()


async def _with_answer_control(app: Any, control: AnswerControl, scope: Any, receive: Any, send: Any) -> None:
    """Run ``app`` for a request of the connection ``control`` belongs to, with ``control`` in its scope."""
    scope.setdefault("extensions", {})[ANSWER_CONTROL] = control
    await app(scope, receive, send)


def httptools_available() -> bool:
    """Whether uvicorn can use the C parser (``httptools``, a dependency of the agent)."""
    try:
        import httptools  # noqa: F401
    except ImportError:
        return False
    return True


def guarded_protocol(limits: ConnectionLimits, parser: str = "auto") -> type[GuardedConnection]:
    """An HTTP protocol class bound to ``limits``, for ``uvicorn.Config(http=...)``.

    Args:
        limits: the limits every connection of the server shares.
        parser: ``"httptools"`` (uvicorn's protocol on the C parser), ``"h11"`` (the pure-Python
            one), or ``"auto"``: httptools when it is installed, else h11. Both get the same guards.

    Raises:
        ValueError: an unknown ``parser``, or ``"httptools"`` when it is not installed.
    """
    if parser == "auto":
        parser = "httptools" if httptools_available() else "h11"
    if parser == "httptools":
        if not httptools_available():
            raise ValueError("the httptools HTTP parser is not installed")
        base = _httptools_protocol()
    elif parser == "h11":
        base = _h11_protocol()
    else:
        raise ValueError(f"unknown HTTP parser {parser!r} (httptools, h11 or auto)")

    class Bound(base):  # type: ignore[valid-type,misc]
        pass

    Bound.limits = limits
    return Bound


if TYPE_CHECKING:
    # What the guard is written against: both of uvicorn's HTTP/1.1 protocols have this shape
    # (transport, loop, client, cycle, on_response_complete, shutdown).
    from uvicorn.protocols.http.h11_impl import H11Protocol as _UvicornProtocol
else:
    _UvicornProtocol = object


def no_delay(transport: asyncio.BaseTransport) -> None:
    """Send what a connection writes at once (``TCP_NODELAY``).

    asyncio sets it only on sockets whose protocol number says TCP; ``rigmon agent`` binds its
    listening socket itself (uvicorn's ``bind_socket``, protocol 0), and without it every answer
    after the first on a kept-open connection waited ~40 ms for the client's delayed ACK.
    """
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass  # the peer already went away: nothing to send faster


class GuardedConnection(_UvicornProtocol):
    """The guard of one connection: a deadline for each request head and admission by `ConnectionLimits`.

    Mixed in before one of uvicorn's HTTP protocols (`guarded_protocol`); the parser-specific
    part is telling it when a request head is complete (`_head_received`).
    """

    limits: ConnectionLimits

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.awaiting_head = True
        self.trusted = False
        self.waiting_since = 0.0
        self.client_host = ""
        self.began_with_tls = False
        self._head_bytes = 0
        self._head_timer: asyncio.TimerHandle | None = None
        self._discarding = False
        self.lingering: LingeringTransport
        self.logger = ClientFaultLog(self.logger, self)  # type: ignore[assignment]
        self.app = functools.partial(_with_answer_control, self.app, AnswerControl(self))

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        no_delay(transport)
        self.lingering = LingeringTransport(transport, self)
        super().connection_made(self.lingering)
        self.client_host = self.client[0] if self.client else ""
        if not self.limits.admit(self):
            self.limits.note_refusal(self.client_host, self.loop.time())
            self._answer_and_close(_REFUSED)
            return
        self._await_head()

    def data_received(self, data: bytes) -> None:
        if self._discarding:
            return
        if self.awaiting_head:
            # Its first bytes say whether the client speaks TLS to this plain-HTTP port (`ClientFaultLog`).
            first = self.cycle is None and self._head_bytes == 0
            self.began_with_tls |= first and data.startswith(TLS_HANDSHAKE_RECORD)
            self._head_bytes += len(data)
        super().data_received(data)
        if self.awaiting_head and self._head_bytes > self.limits.max_head_bytes and not self.transport.is_closing():
            # Counted as it arrives: a head that never ends cannot grow past the limit.
            self._cancel_head_timer()
            self.limits.forget(self)
            self._answer_and_close(_too_large(self.limits.max_head_bytes))

    def _answer_and_close(self, answer: bytes) -> None:
        """Send ``answer`` and close (lingering: see `LingeringTransport`)."""
        self.transport.write(answer)
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        """Answer a request the parser cannot read (uvicorn's answer is plain text) and close."""
        self.limits.forget(self)
        self._cancel_head_timer()
        self._answer_and_close(_MALFORMED)

    def discard_input(self) -> None:
        """Drop whatever the client sends from now on (the connection is closing)."""
        self._discarding = True

    def shutdown(self) -> None:
        idle = self.cycle is None or self.cycle.response_complete
        super().shutdown()
        if idle:
            # The server is stopping: nothing to answer, no reason to linger.
            self.lingering.close_now()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        self.limits.forget(self)
        self.lingering.lost()
        super().connection_lost(exc)

    def input_pending(self) -> bool:
        """Whether the client may still be sending bytes this connection has not read.

        True for a connection refused before reading anything, a request head begun but not
        complete, and a request whose body has not arrived whole; False once the last request
        was read to its end and nothing of a next one has come.
        """
        if self.awaiting_head:
            return self.cycle is None or self._head_bytes > 0
        return self.cycle is None or self.cycle.more_body

    def on_response_complete(self) -> None:
        if not self.transport.is_closing() and not self._next_head_parsed():
            # A keep-alive connection must send its next head in time too (uvicorn's own
            # keep-alive timeout ends once a first byte arrives). Before uvicorn's handling,
            # which may parse a pipelined request at once: its head stops this clock again.
            self._await_head()
        super().on_response_complete()

    def _next_head_parsed(self) -> bool:
        """Whether the next request's head was parsed already (pipelined, waiting for this answer)."""
        return False

    def close_idle(self, why: str) -> None:
        """Close this connection, which has not sent a request head; ``why`` goes to the debug log."""
        self._cancel_head_timer()
        # Its slot is free now, not when the loop gets to connection_lost.
        self.limits.forget(self)
        log.debug("closing connection from %s: %s", self.client_host or "?", why)
        if not self.transport.is_closing():
            self.lingering.close_now()

    def _await_head(self) -> None:
        self.awaiting_head = True
        self._head_bytes = 0
        self.waiting_since = self.loop.time()
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.limits.head_timeout_s, self._head_timed_out)

    def _head_received(self, headers: Iterable[tuple[bytes, bytes]]) -> None:
        """A complete request head arrived (the parser calls this): stop the clock."""
        self.awaiting_head = False
        self._cancel_head_timer()
        if self.limits.authorised(headers):
            self.trusted = True

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.awaiting_head:
            self.limits.timed_out += 1
            self.close_idle(f"no complete request head within {self.limits.head_timeout_s:g} s")

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None


@functools.cache
def _h11_protocol() -> type[GuardedConnection]:
    """uvicorn's h11 protocol (pure Python) with the guard."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(GuardedConnection, H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # Every event h11 parses passes here: a request head stops the clock.
            next_event = self.conn.next_event

            def watched() -> Any:
                event = next_event()
                if isinstance(event, h11.Request):
                    self._head_received(event.headers)
                return event

            self.conn.next_event = watched  # type: ignore[method-assign]

    return GuardedH11Protocol


@functools.cache
def _httptools_protocol() -> type[GuardedConnection]:
    """uvicorn's httptools protocol (the C parser, llhttp) with the guard.

    h11 keeps a pipelined request unparsed until the answer before it is complete (and pauses
    reading); httptools parses it as it arrives. So here a head is also counted when it begins
    while an answer is being sent, and a pipelined head that passes the limit closes the
    connection (no answer can be put in the middle of the one being sent).
    """
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class GuardedHttpToolsProtocol(GuardedConnection, HttpToolsProtocol):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            #: Between a request's first byte and the end of its head, as the parser saw them.
            self._in_head = False

        def data_received(self, data: bytes) -> None:
            if self._discarding:
                return
            if self.awaiting_head:
                super().data_received(data)
                return
            # An answer is being sent: what arrives is the request's body or a pipelined request.
            pipelined = self._in_head
            HttpToolsProtocol.data_received(self, data)
            if pipelined or self._in_head:
                self._head_bytes += len(data)
                if self._in_head and self._head_bytes > self.limits.max_head_bytes \
                        and not self.transport.is_closing():
                    log.debug("closing connection from %s: pipelined request head over %d bytes",
                              self.client_host or "?", self.limits.max_head_bytes)
                    self.lingering.close_now()

        def on_message_begin(self) -> None:
            self._in_head = True
            if not self.awaiting_head:
                # Pipelined behind an answer being sent: its head is counted from here.
                self._head_bytes = 0
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._head_received(self.headers)
            super().on_headers_complete()

        def _next_head_parsed(self) -> bool:
            return bool(self.pipeline)

    return GuardedHttpToolsProtocol
