"""An export whose client has gone (disconnected, not merely slow) stops reading its spool at once: an
hour of an 8-GPU node is hundreds of MB of spool, read and inflated for no one before the slot came back."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rigmon.agent import connections
from rigmon.agent.history_answers import FramesAnswer
from tests.agent.export_helpers import stalled_exports
from tests.agent.test_history_stream import FRAMES

#: Pieces an answer may still read once its client has gone: the one in hand when the loop saw it go.
PIECES_AFTER_GONE = 1


class Spools:
    """Every export's spool: pieces read from it and whether it was closed, counted in `FramesAnswer`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.read = 0
        self.opened = 0
        self.closed = 0
        pieces, close = FramesAnswer.pieces, FramesAnswer.close
        spools = self

        def counted_pieces(answer: FramesAnswer) -> Iterator[bytes]:
            spools.opened += 1
            for piece in pieces(answer):
                spools.read += 1
                yield piece

        def counted_close(answer: FramesAnswer) -> None:
            if not answer.spool.closed:
                spools.closed += 1
            close(answer)

        monkeypatch.setattr(FramesAnswer, "pieces", counted_pieces)
        monkeypatch.setattr(FramesAnswer, "close", counted_close)

    async def settled(self, answers: int) -> int:
        """Pieces read, once ``answers`` answers have begun to read their spools and no more is read for
        a second: the answers wait for their clients to take what was sent.

        An export's slot is taken before its spool is built, in a thread that a loaded machine may
        leave waiting for seconds: a quiet second alone was once counted before the second answer had
        begun. Once begun, an answer reads and sends on this loop until its client's flow control
        holds it, so a second of quiet (20 looks on the same loop) is far more than enough.
        """
        for _ in range(600):
            if self.opened >= answers:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"{self.opened} of {answers} answers began to read their spools")
        last, still = -1, 0
        while still < 20:
            await asyncio.sleep(0.05)
            still, last = (still + 1, last) if self.read == last else (0, self.read)
        return last


def reset(sock: socket.socket) -> None:
    """Close ``sock`` with a reset (the client killed, its machine gone): the agent sees it go at once."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def close(sock: socket.socket) -> None:
    """Close ``sock`` plainly: the agent sees it go when it next writes to it."""
    sock.close()


@pytest.mark.parametrize(("parser", "leave"), [("httptools", reset), ("httptools", close), ("h11", reset)],
                         ids=["httptools-reset", "httptools-close", "h11-reset"])
async def test_an_export_whose_client_disconnects_reads_no_more_of_its_spool(
        tmp_path: Path, export_state: Path, monkeypatch: pytest.MonkeyPatch, parser: str,
        leave: Callable[[socket.socket], None]) -> None:
    """Two exports whose clients take nothing hold both slots; their clients go: the slots come back
    and no more of their spools is read (on old code each was read through, ~130 pieces)."""
    spools = Spools(monkeypatch)
    # The agent takes httptools when it is installed, else h11: both must notice a client gone.
    monkeypatch.setattr(connections, "httptools_available", lambda: parser == "httptools")
    async with stalled_exports(tmp_path, export_state) as (_port, client, stalled):
        before = await spools.settled(2)
        assert spools.opened == 2
        for sock in stalled:
            leave(sock)
        for _ in range(1000):  # their clients gone, the slots come back
            if (await client.get("/v1/snapshot")).status_code == 200:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the slots of the exports whose clients went never came back")
        after = await spools.settled(2)
    whole = FRAMES * 30_000 // (256 * 1024)  # pieces of a whole answer (~30 kB frames): ~140
    assert before < whole // 2, (before, whole)  # the clients went mid-export
    assert after - before <= 2 * PIECES_AFTER_GONE, (before, after)
    assert spools.closed == 2  # the spools were dropped
