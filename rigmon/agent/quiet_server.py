"""QuietServer: a uvicorn server that does not wake while idle (uvicorn's own wakes ten times a second)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from email.utils import formatdate
from typing import Any

import uvicorn
from uvicorn.server import ServerState

from rigmon.agent.client_faults import FaultCounter
from rigmon.agent.tls_edge import HandshakeWatch, tls_edge_factory


class DatedServerState(ServerState):
    """uvicorn's shared server state whose ``default_headers`` carry a Date made when a response asks.

    uvicorn refreshes the Date header from its main loop's once-a-second tick; here it is
    formatted when a response reads the headers and the second has changed since the last
    one, so the header is exact and nothing has to wake to keep it so.

    Args:
        date_header: whether responses carry a Date header (uvicorn's ``date_header``).
        extra: the configured headers that follow it (uvicorn's ``encoded_headers``).
        clock: Unix seconds now (tests pass their own).
    """

    def __init__(self, date_header: bool, extra: list[tuple[bytes, bytes]],
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self._date_header = date_header
        self._clock = clock
        #: The configured headers that follow the Date.
        self.extra = list(extra)
        self._second = -1
        self._headers: list[tuple[bytes, bytes]] = list(extra)

    @property
    def default_headers(self) -> list[tuple[bytes, bytes]]:
        if not self._date_header:
            return self.extra
        now = self._clock()
        second = int(now)
        if second != self._second:
            self._headers = [(b"date", formatdate(now, usegmt=True).encode()), *self.extra]
            self._second = second
        return self._headers

    @default_headers.setter
    def default_headers(self, value: list[tuple[bytes, bytes]]) -> None:
        # uvicorn's ServerState.__init__ and on_tick assign it: the Date is made on reading, and
        # an assignment only makes the next reading build the list anew (``extra`` may have changed).
        self._second = -1


class QuietServer(uvicorn.Server):
    """A `uvicorn.Server` that sleeps until told to exit, and exits at once when told.

    uvicorn's main loop sleeps 0.1 s between checks of ``should_exit`` and refreshes the
    Date header on every tenth: ten wake-ups a second on a node where the agent otherwise
    wakes once a second to sample. Waiting for each second instead (``wait_for`` on an
    event) still started and cancelled a task every second, several turns of the event
    loop on cold caches. Here the main loop awaits one future that setting ``should_exit``
    settles (from any thread), and the Date header is made when a response reads it
    (`DatedServerState`). uvicorn's other periodic work (``callback_notify``,
    ``limit_max_requests``) is not used by the agent; a server configured with either runs
    uvicorn's own loop.
    """

    #: Settled when ``should_exit`` is set; created by `main_loop`.
    _exit_future: asyncio.Future[None] | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _loop_thread: int | None = None
    #: Seconds a TLS client has to complete its handshake (asyncio's default is 60 s); the
    #: agent sets its ``head_timeout_s``. A connection reaches the HTTP protocol, and with it
    #: the agent's connection limits, only after the handshake.
    ssl_handshake_timeout_s: float | None = None
    #: What counts a plain HTTP request to the TLS port (`rigmon.agent.tls_edge.TlsEdge` answers it 400):
    #: the agent's `ConnectionLimits`, which count the opposite case too. None: not counted.
    client_faults: FaultCounter | None = None
    #: What counts failed TLS handshakes, those OpenSSL raises (it watches the server's context) and those
    #: that ended unreported (`rigmon.agent.tls_edge.Unalerted`): the agent's
    #: `rigmon.agent.tls_files.HandshakeFaults`. None: not counted.
    handshake_faults: HandshakeWatch | None = None

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        # The configured headers are known once the config is loaded; until then none.
        self.server_state: DatedServerState = DatedServerState(config.date_header, [])

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        # Loaded by now (serve() loads it): the configured headers follow the Date.
        state = self.server_state
        state.extra = list(self.config.encoded_headers)
        state.default_headers = []  # rebuilt with them at the next read
        if self.config.ssl is None:
            await super().startup(sockets)
            return
        # uvicorn has no setting for either: its create_server calls serve TLS through `TlsEdge` instead
        # (which answers a plain HTTP request, and starts the handshake with this timeout).
        loop = asyncio.get_running_loop()
        create_server = loop.create_server

        async def through_tls_edge(protocol_factory: Callable[[], asyncio.BaseProtocol], *args: Any,
                                   **kwargs: Any) -> asyncio.Server:
            context = kwargs.pop("ssl", None)
            if context is not None:
                if self.handshake_faults is not None:
                    self.handshake_faults.watch(context)
                protocol_factory = tls_edge_factory(protocol_factory, context, self.ssl_handshake_timeout_s,
                                                    self.client_faults, self.handshake_faults)
            return await create_server(protocol_factory, *args, **kwargs)

        loop.create_server = through_tls_edge  # type: ignore[method-assign]
        try:
            await super().startup(sockets)
        finally:
            del loop.create_server

    @property
    def should_exit(self) -> bool:
        return self.__dict__.get("_should_exit", False)  # type: ignore[no-any-return]

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self.__dict__["_should_exit"] = value
        future, loop = self._exit_future, self._loop
        if not value or future is None or loop is None:
            return
        if threading.get_ident() == self._loop_thread:
            _settle(future)
        elif not loop.is_closed():
            loop.call_soon_threadsafe(_settle, future)

    async def main_loop(self) -> None:
        if self.config.callback_notify is not None or self.config.limit_max_requests is not None:
            await super().main_loop()
            return
        loop = asyncio.get_running_loop()
        self._loop, self._loop_thread = loop, threading.get_ident()
        self._exit_future = loop.create_future()
        if not self.should_exit:
            await self._exit_future


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
