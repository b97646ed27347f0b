"""The agent's exports (/v1/history?frames=1, /v1/snapshot): at most `MAX_EXPORTS` served at once,
and spooled answers sent as the client reads that give their slot back however they end."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import Response, StreamingResponse

from rigmon.agent.connections import ANSWER_CONTROL, AnswerControl
from rigmon.agent.history_answers import FramesAnswer
from rigmon.agent.request_guard import Receive, Scope, Send, client_key, error_response

log = logging.getLogger(__name__)

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
#: Seconds a spooled answer waits for its client to take any byte before it is abandoned: a client
#: that stopped reading (a ``rigmon snapshot`` suspended with ^Z) held its slot and its spool (~20 MB
#: on disk) until it went away, and two of them made every other export 503 meanwhile.
SEND_DEADLINE_S = 60.0


class ExportSlots:
    """How many exports are being served, at most ``limit`` (used from the event loop's thread only).

    A slot is taken before the export is read and given back when its answer has gone: a
    streamed answer (`SpooledResponse`) gives it back when its last piece is sent or its client
    has gone.
    """

    def __init__(self, limit: int = MAX_EXPORTS, send_deadline_s: float | None = None) -> None:
        self.limit = limit
        self.open = 0
        #: Seconds a streamed answer's client may take no byte before it is abandoned (`SEND_DEADLINE_S`).
        self.send_deadline_s = SEND_DEADLINE_S if send_deadline_s is None else send_deadline_s

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
    whole, the client gone, never started (a generator that never ran has no ``finally``), or
    abandoned: an answer whose client takes no byte for ``slots.send_deadline_s`` (or
    `SEND_DEADLINE_S`) drops its connection (the client sees it reset, never a short answer
    that looks whole) and logs one line. Once its client has gone (``http.disconnect``) or it is
    abandoned, no more of the spool is read.

    Args:
        answer: the answer.
        slots: where the slot it holds goes back (``None``: it holds none).
    """

    def __init__(self, answer: FramesAnswer, slots: ExportSlots | None) -> None:
        #: Set when nothing more is read or sent: the client took no byte for ``deadline_s`` (the
        #: connection is dropped), or it has gone. (A flag of its own: the pieces' generator holding
        #: the response would make a reference cycle.)
        self.ended = _Flag()
        super().__init__(_sent_pieces(answer, self.ended), media_type=answer.media_type, headers=answer.headers)
        self.answer = answer
        self.slots: ExportSlots | None = slots
        self.deadline_s = SEND_DEADLINE_S if slots is None else slots.send_deadline_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        control = scope.get("extensions", {}).get(ANSWER_CONTROL)
        receive = self._noticing_receive(receive)
        try:
            if isinstance(control, AnswerControl):
                send = self._deadline_send(scope, receive, send, control)
            await super().__call__(scope, receive, send)
        finally:
            self.answer.close()
            if self.slots is not None:
                self.slots.give()
                self.slots = None

    def _noticing_receive(self, receive: Receive) -> Receive:
        """``receive`` that ends the answer when it says the client has gone. Starlette listens for
        that while the answer is sent (ASGI before 2.4, as uvicorn speaks; from 2.4 on, a send to a
        client that has gone fails instead)."""

        async def noticing_receive() -> Any:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.ended.set = True
            return message

        return noticing_receive

    def _deadline_send(self, scope: Scope, receive: Receive, send: Send, control: AnswerControl) -> Send:
        """``send`` that abandons the answer when the client takes no byte for ``deadline_s``."""

        async def deadline_send(message: Any) -> None:
            if self.ended.set:
                return
            unsent = control.unsent_bytes()
            while True:
                try:
                    # uvicorn's send waits for the client (flow control) before it writes anything:
                    # a send cut short here has written nothing, and is made again whole.
                    async with asyncio.timeout(self.deadline_s):
                        await send(message)
                    return
                except TimeoutError:
                    still_unsent = control.unsent_bytes()
                    if still_unsent >= unsent:
                        break
                    unsent = still_unsent  # a slow client, still reading: wait on
            self.ended.set = True
            log.warning("%s %s for %s abandoned: the client took no byte for %g s (connection dropped, "
                        "export slot given back)", scope.get("method"), scope.get("path"), client_key(scope),
                        self.deadline_s)
            control.abort()
            # Returned before uvicorn has seen the connection lost, the answer would be logged as
            # incomplete: wait for the disconnect the drop causes (at once).
            while (await receive())["type"] != "http.disconnect":
                pass

        return deadline_send


class _Flag:
    """A flag shared by a response and its pieces' generator."""

    __slots__ = ("set",)

    def __init__(self) -> None:
        self.set = False


async def _sent_pieces(answer: FramesAnswer, ended: _Flag) -> AsyncIterator[bytes]:
    """``answer``'s pieces, each once the client has taken the ones before; none once ``ended`` is set.

    Made on the loop's thread (a file read, at most inflating 256 KiB): a thread per piece could
    still be reading the spool when a client that went away has it closed. The loop has its turn
    before each piece: uvicorn's send to a client that has gone returns at once without one, and
    the rest of the spool (hundreds of MB for an hour of an 8-GPU node) was read and inflated for
    no one before the ``http.disconnect`` waiting in the loop could end the answer.
    """
    pieces = answer.pieces()  # the response closes the answer (its spool) however this ends
    while True:
        await asyncio.sleep(0)
        if ended.set:
            return
        piece = next(pieces, None)
        if piece is None:
            return
        yield piece
