"""A stop awaited to its end when its caller is cancelled meanwhile (a second Ctrl-C, a SIGTERM, a
timeout around the stop): what writes below a state directory must have stopped before anyone
removes the directory or starts another agent on it."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TypeVar

T = TypeVar("T")


async def to_the_end(stopping: Coroutine[object, object, T]) -> T:
    """Await ``stopping`` to its end even when this task is cancelled meanwhile (each cancel lands
    on a shield around it), then pass the cancellation on.

    Raises:
        CancelledError: this task was cancelled meanwhile (once ``stopping`` has ended), or
            ``stopping`` itself ended cancelled.
        Exception: what ``stopping`` raised.
    """
    task = asyncio.ensure_future(stopping)
    interrupted = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            # This task's cancellation, unless the stop itself ended cancelled.
            interrupted = interrupted or not task.done()
    result = task.result()
    if interrupted:
        raise asyncio.CancelledError
    return result
