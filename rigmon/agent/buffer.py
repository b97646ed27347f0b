"""FrameBuffer: the bounded in-memory ring of recent frames behind /v1/samples and /v1/stream."""

from __future__ import annotations

import asyncio
from collections import deque

from rigmon.schema import Frame


class FrameBuffer:
    """Holds the last ``capacity`` frames of one agent run, in seq order.

    Single-threaded: appended to and read from the agent's event loop.
    """

    def __init__(self, capacity: int) -> None:
        self._frames: deque[Frame] = deque(maxlen=capacity)
        self._changed = asyncio.Event()

    def append(self, frame: Frame) -> None:
        """Add the newest frame and wake every waiting reader."""
        if self._frames and frame.seq <= self._frames[-1].seq:
            raise ValueError(f"seq {frame.seq} is not after {self._frames[-1].seq}")
        self._frames.append(frame)
        self._changed.set()
        self._changed = asyncio.Event()

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
        changed = self._changed
        try:
            await asyncio.wait_for(changed.wait(), timeout_s)
        except TimeoutError:
            return False
        return True
