"""httpx client for one agent: follows /v1/stream, resumes after disconnects, backs off when unreachable.

No UI here: `AgentClient.follow` yields `Update`s (connected, frames or summaries, gap, failed)
forever, and whoever drives it files them into a `rigmon.cluster.node_store.NodeStore`. A client
follows its agent's full frames or, with ``view="summary"`` (`AgentClient.set_view`, switched
at any time), the summary records of ``/v1/stream?view=summary``; an agent too old for those
sends full frames, which are yielded as such. Every answer is
decoded by `rigmon.cluster.sanitise.decode_agent` and every failure reason cleaned, so no
string from an agent carries terminal control characters past this module.

The single requests are `rigmon.cluster.agent_requests` (and `alarm_requests`), answers are read
by `agent_answers`, TLS contexts come from `tls`; this module follows the agent with them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TypeVar

import httpx

from rigmon.cluster.agent_answers import MAX_ANSWER_BYTES, MAX_EVENT_LINE_BYTES, AgentError
from rigmon.cluster.agent_requests import REQUEST_DEADLINE_S, STREAM_READ_TIMEOUT_S, SamplesPage, View
from rigmon.cluster.alarm_requests import AlarmRequests
from rigmon.cluster.backoff import Backoff
from rigmon.cluster.tls import tls_context
from rigmon.cluster.updates import (
    Connected,
    Failed,
    GapReported,
    Item,
    Sampled,
    Summarized,
    Update,
    as_updates,
    frame_of,
)
from rigmon.schema import Frame, Gap, Info
from rigmon.summary import SummaryRecord

# The pieces of the client live in their own modules; these names stay importable from here.
__all__ = [
    "BACKFILL_FRAMES", "HISTORY_FILL_ROUNDS", "HISTORY_FILL_SPAN_S", "MAX_ANSWER_BYTES", "MAX_EVENT_LINE_BYTES",
    "POLL_ROUNDS", "REQUEST_DEADLINE_S", "STREAM_READ_TIMEOUT_S", "AgentClient", "AgentError", "Backoff",
    "Connected", "Failed", "GapReported", "SamplesPage", "Sampled", "Summarized", "Update", "View", "tls_context",
]

T = TypeVar("T")

#: Frames fetched from /v1/samples when first connecting to an agent run, so the screen
#: starts with a couple of minutes of history instead of a single point.
BACKFILL_FRAMES = 120
#: Window of one /v1/history request when filling a gap from the agent's journal, and how
#: many such windows at most (an hour at 1 Hz): beyond that the gap is left as a gap.
HISTORY_FILL_SPAN_S = 300.0
HISTORY_FILL_ROUNDS = 12
#: /v1/samples polls made after the agent refused a stream, before trying the stream again.
POLL_ROUNDS = 30


class AgentClient(AlarmRequests):
    """Client of one agent's /v1 API.

    Args:
        url: the agent's base URL (``http://host:9871``).
        token: bearer token, or ``None``.
        transport: httpx transport (tests pass ``httpx.MockTransport``).
        request_timeout_s: connect and read timeout of ordinary requests.
        stream_read_timeout_s: longest silence tolerated on the stream.
        backoff: retry delays while the agent is unreachable.
        backfill_frames: frames fetched on first contact with an agent run.
        sleep: awaitable delay (tests pass a fake).
        control_token: token that may acknowledge alarms, or ``None``.
        ca_file: PEM CA certificate(s) to verify an ``https://`` agent with (default: httpx's
            CA bundle, certifi's or ``SSL_CERT_FILE``/``SSL_CERT_DIR``).
        request_deadline_s: longest time one ordinary request may take in all.
        max_answer_bytes: largest answer accepted; longest stream line is `MAX_EVENT_LINE_BYTES`.
        view: ``full`` frames, or ``summary`` records (see `set_view`).
        token_from: where ``token`` was given: a 401 says to check it there.
        token_where: where a read token for this agent would be given: a 401 to a request without one
            says to give it there.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        control_token: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        request_timeout_s: float = 5.0,
        stream_read_timeout_s: float = STREAM_READ_TIMEOUT_S,
        backoff: Backoff | None = None,
        backfill_frames: int = BACKFILL_FRAMES,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        ca_file: str | None = None,
        request_deadline_s: float = REQUEST_DEADLINE_S,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        view: View = "full",
        token_from: str | None = None,
        token_where: str | None = None,
    ) -> None:
        super().__init__(
            url, token, control_token=control_token, transport=transport, request_timeout_s=request_timeout_s,
            stream_read_timeout_s=stream_read_timeout_s, backoff=backoff, ca_file=ca_file,
            request_deadline_s=request_deadline_s, max_answer_bytes=max_answer_bytes, token_from=token_from,
            token_where=token_where,
        )
        self.backfill_frames = backfill_frames
        self._sleep = sleep
        self.run_id: str | None = None
        self.last_seq: int | None = None
        self.last_taken_at: float | None = None
        self.interval_s = 1.0
        self.view: View = view
        self._view_changed = asyncio.Event()
        # The seq whose frame is fetched again whole after a switch to full frames (the
        # summary record of it left the node screen without its full readings).
        self._again_seq: int | None = None
        # Set by `answered_elsewhere`: the back-off of `follow` ends at once.
        self._answered = asyncio.Event()
        # A stream closed cleanly and nothing new has arrived since: the next clean close backs off.
        self._closed_idle = False

    def answered_elsewhere(self) -> None:
        """Another request to this agent's URL was answered (the dashboard's alarm poll, say): if
        `follow` is waiting in its back-off after a failure, it tries again at once rather than
        after the rest of the delay (up to `Backoff.max_s`), so a restarted agent's row is live
        when its agent is. An agent that is really down answers nothing and keeps its back-off."""
        self._answered.set()

    async def _back_off(self, delay_s: float) -> None:
        """Wait ``delay_s`` seconds before trying the agent again, or until `answered_elsewhere`."""
        sleeping = asyncio.ensure_future(self._sleep(delay_s))
        answered = asyncio.ensure_future(self._answered.wait())
        try:
            await asyncio.wait((sleeping, answered), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in (sleeping, answered):
                waiting.cancel()
            await asyncio.gather(sleeping, answered, return_exceptions=True)

    def set_view(self, view: View) -> None:
        """Follow full frames or summary records from now on: an open stream is closed and
        the next one resumes after the last seq received, so no frame is lost or repeated.
        Switching to full frames fetches the newest frame again whole."""
        if view == self.view:
            return
        self.view = view
        if view == "full" and self.last_seq is not None:
            self._again_seq = self.last_seq
        self._view_changed.set()

    def _track(self, items: Sequence[T]) -> tuple[T, ...]:
        """Remember where we are; drop frames (or summary records) we already have, except the
        frame asked for again whole after a switch to full frames."""
        fresh = []
        for item in items:
            f = frame_of(item)  # type: ignore[arg-type]
            if f.run_id == self.run_id and self.last_seq is not None and f.seq <= self.last_seq:
                if not (f.seq == self._again_seq and isinstance(item, Frame)):
                    continue
                self._again_seq = None
            fresh.append(item)
        if fresh:
            last = frame_of(fresh[-1])  # type: ignore[arg-type]
            if not (last.run_id == self.run_id and self.last_seq is not None and last.seq <= self.last_seq):
                self.run_id = last.run_id
                self.last_seq = last.seq
                self.last_taken_at = last.taken_at
        return tuple(fresh)

    async def _fill_gap(self, gap: Gap) -> AsyncIterator[Update]:
        """Frames gone from the agent's ring buffer are still in its journal: fetch them, and
        report as a gap only what the journal could not give."""
        async for update in self._journal_fill(gap.run_id, gap.to_seq):
            yield update
        if gap.run_id != self.run_id or self.last_seq is None:
            yield GapReported(gap)
        elif self.last_seq < gap.to_seq:
            yield GapReported(Gap(run_id=gap.run_id, from_seq=max(gap.from_seq, self.last_seq + 1),
                                  to_seq=gap.to_seq, reason=gap.reason))

    async def _journal_fill(self, run_id: str, up_to_seq: int | None) -> AsyncIterator[Update]:
        """Frames of ``run_id`` after the last we have (up to ``up_to_seq``) from the agent's
        journal: what a gap in the ring buffer, or an agent that died, would otherwise lose.

        Best effort: an agent without a journal (404) or whose journal fails fills nothing.
        """
        if self.last_taken_at is None or self.last_seq is None or run_id != self.run_id:
            return
        for _ in range(HISTORY_FILL_ROUNDS):
            start = self.last_taken_at
            try:
                frames = await self.history_frames(start, start + HISTORY_FILL_SPAN_S)
            except AgentError:
                return
            wanted = tuple(sorted((f for f in frames if f.run_id == run_id and f.seq > self.last_seq
                                   and (up_to_seq is None or f.seq <= up_to_seq)), key=lambda f: f.seq))
            fresh = self._track(wanted)
            if not fresh:
                return
            yield Sampled(fresh)
            if up_to_seq is not None and self.last_seq >= up_to_seq:
                return

    async def _backfill(self, info: Info) -> AsyncIterator[Update]:
        """Fetch the newest frames of a run we have not seen yet."""
        latest = await self.latest()
        if latest is None or latest.run_id != info.run_id:
            return
        since = max(0, latest.seq - self.backfill_frames)
        while True:
            page = await self.samples(since, info.run_id, view=self.view)
            listed: Sequence[Item] = page.summaries or page.frames
            for update in as_updates(self._track(listed)):
                yield update
            if not page.more or not listed:
                return
            since = frame_of(listed[-1]).seq

    async def _poll(self) -> AsyncIterator[Update]:
        """Fallback when the stream is refused: poll /v1/samples for a while."""
        for _ in range(POLL_ROUNDS):
            page = await self.samples(self.last_seq or 0, self.run_id, view=self.view)
            if page.gap is not None:
                async for update in self._fill_gap(page.gap):
                    yield update
            listed: Sequence[Item] = page.summaries or page.frames
            items = self._track(listed)
            if items:
                self._progressed()
            for update in as_updates(items):
                yield update
            if not page.more:
                await self._sleep(self.interval_s)

    async def _stream_until_switch(self) -> AsyncIterator[Frame | SummaryRecord | Gap]:
        """`stream` in the current view, ended early (its connection closed) by `set_view`."""
        self._view_changed.clear()
        after = self.last_seq
        if self._again_seq is not None and self._again_seq == self.last_seq and after is not None:
            after -= 1  # the newest frame once more, whole
        items = self.stream(after, self.run_id, self.view)
        switched = asyncio.ensure_future(self._view_changed.wait())
        step: asyncio.Future[Frame | SummaryRecord | Gap] | None = None
        try:
            while True:
                step = asyncio.ensure_future(items.__anext__())
                await asyncio.wait((step, switched), return_when=asyncio.FIRST_COMPLETED)
                if not step.done():
                    return
                try:
                    item = step.result()
                except StopAsyncIteration:
                    return
                step = None
                yield item
        finally:
            switched.cancel()
            if step is not None and not step.done():
                # The read in progress ends here (its connection closes), also when this
                # generator is itself cancelled: nothing may go on reading after it.
                step.cancel()
                await asyncio.gather(step, return_exceptions=True)
            await items.aclose()

    def _progressed(self) -> None:
        """Something new arrived from the agent: retries start from the shortest delay again."""
        self.backoff.reset()
        self._closed_idle = False

    async def _stream_closed(self) -> None:
        """The agent ended the stream cleanly: wait (or not) before opening the next one.

        A clean close is an answer the agent completed (no broken connection, no bad event): it
        is stopping (a restart), or it ended its streams (a reload). The follow reconnects at
        once, so the node's row is stale no longer than the agent is away. Only a stream that
        closed when the one before it had closed too, with nothing new from the agent in between,
        waits for the back-off (doubling up to `Backoff.max_s`): an agent that ends every stream
        at once is retried at a bounded rate, not in a loop.
        """
        if self._closed_idle:
            await self._sleep(self.backoff.next())
        self._closed_idle = True

    async def follow(self) -> AsyncIterator[Update]:
        """Follow the agent forever: yields updates, retrying with back-off on failures."""
        while True:
            try:
                info = await self.info()
                self.interval_s = info.interval_s
                yield Connected(info)
                if info.run_id != self.run_id:
                    if self.run_id is not None:
                        # The agent restarted: the dead run's last frames are in its journal.
                        async for update in self._journal_fill(self.run_id, None):
                            yield update
                    async for update in self._backfill(info):
                        yield update
                try:
                    switching = True
                    while switching:
                        async for item in self._stream_until_switch():
                            if isinstance(item, Gap):
                                async for update in self._fill_gap(item):
                                    yield update
                                continue
                            items = self._track((item,))
                            if items:
                                self._progressed()
                                yield as_updates(items)[0]
                        # Ended by `set_view`: the same agent run, resumed in the other view.
                        switching = self._view_changed.is_set()
                except AgentError as exc:
                    if exc.status not in (404, 503):
                        raise
                    # The agent refuses streams (too many open, or an older agent without
                    # one): poll instead, and try the stream again later.
                    async for update in self._poll():
                        yield update
                    continue
                await self._stream_closed()
            except AgentError as exc:
                delay = self.backoff.next()
                # Only an answer after this failure ends its back-off (not one while the stream was up).
                self._answered.clear()
                yield Failed(exc.reason, delay)
                await self._back_off(delay)
