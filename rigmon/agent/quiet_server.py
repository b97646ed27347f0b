"""QuietServer: a uvicorn server whose housekeeping wakes once a second instead of ten times."""

from __future__ import annotations

import asyncio

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
