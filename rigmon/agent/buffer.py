"""FrameBuffer: the bounded in-memory ring of recent frames behind /v1/samples and /v1/stream."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

from rigmon.schema import Frame


class FrameBuffer:
    """Holds the last ``capacity`` frames of one agent run, in seq order.

    Single-threaded: appended to and read from the agent's event loop.
    """

    def __init__(self, capacity: int) -> None:
        self._frames: deque[Frame] = deque(maxlen=capacity)
        #: Readers waiting for the next frame (`wait_after`); empty when nobody follows the stream.
        self._waiters: list[asyncio.Future[bool]] = []

    def append(self, frame: Frame) -> None:
        """Add the newest frame and wake every waiting reader."""
        if self._frames and frame.seq <= self._frames[-1].seq:
            raise ValueError(f"seq {frame.seq} is not after {self._frames[-1].seq}")
        self._frames.append(frame)
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                _settle(waiter, True)

    @property
    def latest(self) -> Frame | None:
        """The newest frame, if any."""
        return self._frames[-1] if self._frames else None

    @property
    def oldest_seq(self) -> int | None:
        """Seq of the oldest frame still held."""
        return self._frames[0].seq if self._frames else None

    def __len__(self) -> int:
        return len(self._frames)

    def since(self, seq: int, limit: int | None = None) -> list[Frame]:
        """Frames with a seq greater than ``seq``, oldest first, at most ``limit``."""
        if not self._frames or seq >= self._frames[-1].seq:
            return []
        start = max(0, seq + 1 - self._frames[0].seq)
        stop = len(self._frames) if limit is None else min(len(self._frames), start + limit)
        return [self._frames[i] for i in range(start, stop)]

    async def wait_after(self, seq: int, timeout_s: float) -> bool:
        """Wait until a frame newer than ``seq`` exists; False on timeout."""
        if self._frames and self._frames[-1].seq > seq:
            return True
        # One future and one timer per wait: ``asyncio.wait_for(event.wait(), timeout)`` started
        # a task per subscriber per frame.
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiters.append(waiter)
        timer = loop.call_later(timeout_s, _settle, waiter, False)
        try:
            return await waiter
        finally:
            timer.cancel()
            # Timed out or cancelled (the reader went away): no frame took it off the list.
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)


def _settle(waiter: asyncio.Future[bool], value: bool) -> None:
    if not waiter.done():
        waiter.set_result(value)
