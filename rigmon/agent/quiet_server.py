"""QuietServer: a uvicorn server whose housekeeping wakes once a second instead of ten times."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn

#: Seconds between housekeeping ticks (uvicorn's own is 0.1 s). The Date header has a
#: resolution of one second, so ticking once a second keeps it exact.
TICK_S = 1.0
#: uvicorn counts its 0.1 s ticks and does its once-a-second work when the count is a multiple of 10.
_UVICORN_TICKS_PER_S = 10


class QuietServer(uvicorn.Server):
    """A `uvicorn.Server` that wakes once a second while idle, and at once when told to exit.

    uvicorn's main loop sleeps 0.1 s between checks of ``should_exit``: ten wake-ups a
    second on a node where the agent otherwise wakes once a second to sample. Each
    wake-up costs a context switch and a turn of the event loop, which on a busy node is
    over a tenth of a millisecond; together they were a quarter of the agent's CPU time.
    Here the loop waits on an event that setting ``should_exit`` sets, with a one-second
    timeout for the Date header and uvicorn's other once-a-second work (`on_tick`).

    ``should_exit`` is set from the server's own event loop (the CLI's signal handler,
    `BackgroundAgent`, the simulator); a set from another thread is still seen within
    `TICK_S`.
    """

    _exit_event: asyncio.Event | None = None
    #: Seconds a TLS client has to complete its handshake (asyncio's default is 60 s); the
    #: agent sets its ``head_timeout_s``. A connection reaches the HTTP protocol, and with it
    #: the agent's connection limits, only after the handshake.
    ssl_handshake_timeout_s: float | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        timeout_s = self.ssl_handshake_timeout_s
        if timeout_s is None or self.config.ssl is None:
            await super().startup(sockets)
            return
        # uvicorn has no setting for it: its create_server calls get the timeout added here.
        loop = asyncio.get_running_loop()
        create_server = loop.create_server

        async def with_handshake_timeout(*args: Any, **kwargs: Any) -> asyncio.Server:
            if kwargs.get("ssl") is not None:
                kwargs.setdefault("ssl_handshake_timeout", timeout_s)
            return await create_server(*args, **kwargs)

        loop.create_server = with_handshake_timeout  # type: ignore[method-assign]
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
        if value and self._exit_event is not None:
            self._exit_event.set()

    async def main_loop(self) -> None:
        self._exit_event = asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            # Counted in uvicorn's 0.1 s units, so on_tick's once-a-second work runs each time.
            counter = (counter + _UVICORN_TICKS_PER_S) % 864000
            if not self.should_exit:
                try:
                    await asyncio.wait_for(self._exit_event.wait(), TICK_S)
                except TimeoutError:
                    pass
            should_exit = await self.on_tick(counter)
