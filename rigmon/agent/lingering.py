"""LingeringTransport: the close of a connection answered before its request was read whole."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rigmon.agent.connections import GuardedConnection

#: Seconds a refused connection is still read (and what it sends dropped) after its answer, so
#: the client's request in flight does not make the kernel reset the connection and lose the answer.
LINGER_S = 1.0


class LingeringTransport(asyncio.Transport):
    """A transport whose `close` ends our side, drains the client's for `LINGER_S`, then closes.

    An answer sent before the whole request was read (413 for a body over the limit, 431, 503)
    is followed by a close while the client is still sending; the kernel then resets the
    connection, and a reset can make the client lose the answer it was about to read. So the
    close is lingering, as web servers do: half-close, read and drop what still comes, close
    when the client has closed its side or after `LINGER_S`. A connection whose request was
    read whole (an ordinary answer with ``Connection: close``, an idle keep-alive connection)
    has nothing in flight to reset and closes at once: lingering there cost every such request
    a half-close, another read of the client's end and a timer that woke the loop a second later.
    """

    def __init__(self, transport: asyncio.Transport, protocol: GuardedConnection) -> None:
        super().__init__()
        self._transport = transport
        self._protocol = protocol
        self._closing = False
        self._linger: asyncio.TimerHandle | None = None

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        real = self._transport
        if real.is_closing():
            return
        if not real.can_write_eof() or not self._protocol.input_pending():
            real.close()
            return
        self._protocol.discard_input()
        real.write_eof()
        real.resume_reading()
        self._linger = self._protocol.loop.call_later(LINGER_S, real.close)

    def lost(self) -> None:
        """The connection is closed (the client closed its side): no lingering left to end."""
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None

    def close_now(self) -> None:
        """Close without lingering (a connection that has no request to answer)."""
        self._closing = True
        self._transport.close()

    def is_closing(self) -> bool:
        return self._closing or self._transport.is_closing()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._transport.write(data)

    def writelines(self, list_of_data: Any) -> None:
        self._transport.writelines(list_of_data)

    def write_eof(self) -> None:
        self._transport.write_eof()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def abort(self) -> None:
        self._closing = True
        self._transport.abort()

    def pause_reading(self) -> None:
        if not self._closing:
            self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()
