"""The agent's exports (/v1/history?frames=1, /v1/snapshot): at most `MAX_EXPORTS` served at once,
and spooled answers sent as the client reads that give their slot back however they end."""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.responses import Response, StreamingResponse

from rigmon.agent.history_answers import FramesAnswer
from rigmon.agent.request_guard import Receive, Scope, Send, error_response

#: Exports served at once: ``/v1/history?frames=1`` (up to an hour of the journal read, spooled and
#: sent) and ``/v1/snapshot`` (every raw source read). More are answered 503 with ``Retry-After``: a
#: bug report pulled by several people at once must not take a training node's CPU and disk.
MAX_EXPORTS = 2
#: ``/v1/history?frames=1`` over a window this short is not counted as an export: the dashboard
#: fills a gap in a node's stream from the journal 300 s at a time (a few MB), and a fill
#: refused while two exports run would be drawn as frames lost.
UNCAPPED_FRAMES_SPAN_S = 300.0
#: Seconds an export refused for `MAX_EXPORTS` is told to wait before asking again (``Retry-After``).
EXPORT_RETRY_AFTER_S = 5


class ExportSlots:
    """How many exports are being served, at most ``limit`` (used from the event loop's thread only).

    A slot is taken before the export is read and given back when its answer has gone: a
    streamed answer (`SpooledResponse`) gives it back when its last piece is sent or its client
    has gone.
    """

    def __init__(self, limit: int = MAX_EXPORTS) -> None:
        self.limit = limit
        self.open = 0

    def take(self) -> bool:
        """Take a slot; ``False`` when all are taken (answer `refusal`)."""
        if self.open >= self.limit:
            return False
        self.open += 1
        return True

    def give(self) -> None:
        """Give a taken slot back."""
        self.open -= 1

    def refusal(self) -> Response:
        """The 503 (with ``Retry-After``) of an export beyond the limit."""
        response = error_response(503, f"{self.open} exports (history frames, snapshots) are being served, the most "
                                       f"this agent serves at once; retry in {EXPORT_RETRY_AFTER_S} s")
        response.headers["Retry-After"] = str(EXPORT_RETRY_AFTER_S)
        return response


class SpooledResponse(StreamingResponse):
    """A `FramesAnswer` sent piece by piece as the client reads (uvicorn's flow control, as a long
    ``/v1/samples``). Its spool is dropped and its export slot given back however it ends: sent
    whole, the client gone, or never started (a generator that never ran has no ``finally``).

    Args:
        answer: the answer.
        slots: where the slot it holds goes back (``None``: it holds none).
    """

    def __init__(self, answer: FramesAnswer, slots: ExportSlots | None) -> None:
        super().__init__(_sent_pieces(answer), media_type=answer.media_type, headers=answer.headers)
        self.answer = answer
        self.slots: ExportSlots | None = slots

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.answer.close()
            if self.slots is not None:
                self.slots.give()
                self.slots = None


async def _sent_pieces(answer: FramesAnswer) -> AsyncIterator[bytes]:
    """``answer``'s pieces, each once the client has taken the ones before.

    Made on the loop's thread (a file read, at most inflating 256 KiB): a thread per piece could
    still be reading the spool when a client that went away has it closed.
    """
    for piece in answer.pieces():
        yield piece
