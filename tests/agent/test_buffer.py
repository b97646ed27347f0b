"""FrameBuffer: frames in seq order, and readers waiting for the next one."""

from __future__ import annotations

import asyncio

import pytest

from rigmon.agent.buffer import FrameBuffer
from rigmon.schema import SCHEMA_VERSION, Frame, Readings


def frame(seq: int) -> Frame:
    return Frame(schema=SCHEMA_VERSION, node="n", run_id="r", seq=seq, taken_at=float(seq), agent_start=0.0,
                 collectors={}, readings=Readings())


async def test_waiting_readers_wake_on_the_next_frame_without_a_task_each() -> None:
    # A subscriber waits for every frame: ``wait_for(event.wait(), timeout)`` started a task per
    # wait, per subscriber, per frame.
    buffer = FrameBuffer(10)
    buffer.append(frame(1))
    assert await buffer.wait_after(0, 5.0)
    readers = [asyncio.create_task(buffer.wait_after(1, 5.0)) for _ in range(3)]
    await asyncio.sleep(0.01)
    assert asyncio.all_tasks() == {*readers, asyncio.current_task()}
    buffer.append(frame(2))
    assert await asyncio.gather(*readers) == [True, True, True]
    assert buffer.since(1) == [frame(2)]


async def test_a_wait_times_out_and_a_cancelled_reader_is_forgotten() -> None:
    buffer = FrameBuffer(10)
    buffer.append(frame(1))
    assert not await buffer.wait_after(1, 0.01)
    reader = asyncio.create_task(buffer.wait_after(1, 5.0))
    await asyncio.sleep(0.01)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    assert buffer._waiters == []
    buffer.append(frame(2))
    assert await buffer.wait_after(1, 0.01)


def test_seq_must_grow() -> None:
    buffer = FrameBuffer(2)
    buffer.append(frame(5))
    with pytest.raises(ValueError):
        buffer.append(frame(5))
    buffer.append(frame(6))
    buffer.append(frame(7))
    assert buffer.oldest_seq == 6 and len(buffer) == 2
