"""httpx client for one agent: follows /v1/stream, resumes after disconnects, backs off when unreachable.

No UI here: `AgentClient.follow` yields `Update`s (connected, frames or summaries, gap, failed)
forever, and whoever drives it files them into a `rigmon.cluster.store.NodeStore`. A client
follows its agent's full frames or, with ``view="summary"`` (`AgentClient.set_view`, switched
at any time), the summary records of ``/v1/stream?view=summary``; an agent too old for those
sends full frames, which are yielded as such. Every answer is
decoded by `rigmon.cluster.sanitise.decode_agent` and every failure reason cleaned, so no
string from an agent carries terminal control characters past this module.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import ssl
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar, Union

import httpx

from rigmon.cluster.sanitise import clean_text, decode_agent
from rigmon.cluster.sse import SseParser
from rigmon.schema import (
    SCHEMA_VERSION,
    Alarm,
    AlarmList,
    Frame,
    Gap,
    GuardReading,
    History,
    Info,
    SchemaError,
)
from rigmon.summary import SummaryRecord

T = TypeVar("T")
View = Literal["full", "summary"]

#: Frames fetched from /v1/samples when first connecting to an agent run, so the screen
#: starts with a couple of minutes of history instead of a single point.
BACKFILL_FRAMES = 120
#: Window of one /v1/history request when filling a gap from the agent's journal, and how
#: many such windows at most (an hour at 1 Hz): beyond that the gap is left as a gap.
HISTORY_FILL_SPAN_S = 300.0
HISTORY_FILL_ROUNDS = 12
#: A stream silent for this long (no frame, no keep-alive) is dropped and reopened; the
#: agent sends a keep-alive comment every 15 s.
STREAM_READ_TIMEOUT_S = 20.0
#: /v1/samples polls made after the agent refused a stream, before trying the stream again.
POLL_ROUNDS = 30
#: Largest answer read from an agent (a full /v1/samples page of big frames is a few MB); a
#: broken or hostile peer sending more is dropped, not buffered.
MAX_ANSWER_BYTES = 64 * 1024 * 1024
#: Longest line of the event stream (one frame is one line).
MAX_EVENT_LINE_BYTES = 16 * 1024 * 1024
#: Longest time one ordinary request may take in all, however steadily the bytes trickle in
#: (the read timeout only bounds the silence between two of them).
REQUEST_DEADLINE_S = 30.0


_TLS_LOCK = threading.Lock()
#: TLS contexts shared by every client of this process: one per CA file (``None``: httpx's default
#: store). Building one loads a CA bundle (~20 ms of CPU), once per client before.
_TLS_CONTEXTS: dict[str | None, ssl.SSLContext] = {}
#: The context handed to clients of ``http://`` agents, which never use one (httpx wants one at
#: construction): it loads no CA, so it would refuse any TLS peer if one were ever reached.
_PLAIN: list[ssl.SSLContext] = []


def tls_context(url: str, ca_file: str | None = None) -> ssl.SSLContext:
    """The TLS context for an agent at ``url``, shared with every other client that needs the same one.

    ``https://`` agents share one context per CA file (``None``: the store httpx verifies with by
    default); ``http://`` agents all get one context that loads no CA.

    Raises:
        OSError: ``ca_file`` cannot be read.
        ssl.SSLError: ``ca_file`` holds no usable certificate.
    """
    with _TLS_LOCK:
        if not url.lower().startswith("https://"):
            if not _PLAIN:
                _PLAIN.append(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
            return _PLAIN[0]
        key = os.path.abspath(ca_file) if ca_file else None
        context = _TLS_CONTEXTS.get(key)
        if context is None:
            context = ssl.create_default_context(cafile=key) if key else httpx.create_ssl_context()
            _TLS_CONTEXTS[key] = context
        return context


@dataclass(frozen=True, slots=True)
class Connected:
    """The agent answered /v1/info."""

    info: Info


@dataclass(frozen=True, slots=True)
class Sampled:
    """New frames, oldest first (one from the stream, several from a backfill)."""

    frames: tuple[Frame, ...]


@dataclass(frozen=True, slots=True)
class Summarized:
    """New summary records (``view="summary"``), oldest first."""

    records: tuple[SummaryRecord, ...]


@dataclass(frozen=True, slots=True)
class GapReported:
    """The agent said frames we asked for are gone (it restarted, or its buffer moved on)."""

    gap: Gap


@dataclass(frozen=True, slots=True)
class Failed:
    """Getting data failed; the client retries after ``retry_in_s`` seconds."""

    reason: str
    retry_in_s: float


Update = Union[Connected, Sampled, Summarized, GapReported, Failed]


@dataclass(frozen=True, slots=True)
class SamplesPage:
    """One /v1/samples answer."""

    run_id: str
    frames: tuple[Frame, ...]
    gap: Gap | None = None
    more: bool = False
    summaries: tuple[SummaryRecord, ...] = ()


class AgentError(Exception):
    """A request to the agent failed; ``reason`` is shown to the operator.

    The reason may quote the agent (an error body, a status line, a malformed value), so it
    is cleaned of terminal control characters here.
    """

    def __init__(self, reason: str, status: int | None = None) -> None:
        reason = clean_text(reason)
        super().__init__(reason)
        self.reason = reason
        self.status = status


class Backoff:
    """Exponential delays between retries: ``initial_s``, doubling, capped at ``max_s``."""

    def __init__(self, initial_s: float = 0.5, max_s: float = 15.0) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self._next_s = initial_s

    def next(self) -> float:
        """The delay before the next retry (then double it)."""
        delay = self._next_s
        self._next_s = min(self.max_s, self._next_s * 2)
        return delay

    def reset(self) -> None:
        """Data arrived: start from ``initial_s`` again."""
        self._next_s = self.initial_s


def _reason(exc: Exception) -> str:
    """A short operator-facing reason for a failed request."""
    if isinstance(exc, httpx.ConnectTimeout):
        return "connect timed out"
    if isinstance(exc, httpx.ReadTimeout):
        return "timed out waiting for data"
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    if isinstance(exc, httpx.ConnectError):
        detail = str(exc).split("] ", 1)[-1] or "connection failed"
        return f"cannot connect: {detail}"
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
        return f"connection lost: {exc or type(exc).__name__}"
    return f"{type(exc).__name__}: {exc}"


def _status_error(response: httpx.Response, body: bytes) -> AgentError:
    try:
        detail = str(json.loads(body)["error"])
    except (ValueError, KeyError, TypeError, RecursionError):
        detail = response.reason_phrase
    if response.status_code == 401:
        return AgentError(f"401 unauthorized: {detail}", 401)
    if response.status_code == 403:
        return AgentError(f"403 forbidden: {detail}", 403)
    return AgentError(f"HTTP {response.status_code}: {detail}", response.status_code)


_LINE_END = re.compile(r"\r\n|\r|\n")


async def _read_bounded(response: httpx.Response, limit: int) -> bytes:
    """The body of a streamed ``response``, refusing more than ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise AgentError(f"answer larger than {limit // (1024 * 1024)} MB")
        chunks.append(chunk)
    return b"".join(chunks)


async def _bounded_lines(response: httpx.Response, limit: int) -> AsyncIterator[str]:
    """Lines of a streamed text ``response`` (CR, LF or CRLF ends one), none longer than ``limit``."""
    parts: list[str] = []
    size = 0
    async for text in response.aiter_text():
        if not _LINE_END.search(text) and not (parts and parts[-1].endswith("\r")):
            # The middle of a long line: keep the piece, look at it again only once it ends.
            parts.append(text)
            size += len(text)
            if size > limit:
                raise AgentError(f"event stream line longer than {limit // (1024 * 1024)} MB")
            continue
        # Only CR, LF and CRLF end a line in an event stream (not str.splitlines' others).
        *lines, pending = _LINE_END.split("".join(parts) + text)
        if pending == "" and text.endswith("\r"):
            # A CR at the end of a chunk: its LF may open the next one.
            lines, pending = lines[:-1], lines[-1] + "\r"
        for line in lines:
            yield line
        parts, size = [pending], len(pending)
        if size > limit:
            raise AgentError(f"event stream line longer than {limit // (1024 * 1024)} MB")
    pending = "".join(parts)
    if pending:
        # An unterminated last line, or one whose CR ended the stream.
        yield pending.removesuffix("\r")


def _check_frame(frame: Frame) -> Frame:
    if frame.schema != SCHEMA_VERSION:
        raise SchemaError(f"schema version {frame.schema}, this client speaks {SCHEMA_VERSION}")
    return frame


def _check_record(record: SummaryRecord) -> SummaryRecord:
    _check_frame(record.frame)
    return record


Item = Union[Frame, SummaryRecord]


def _frame_of(item: Item) -> Frame:
    return item.frame if isinstance(item, SummaryRecord) else item


def _updates(items: Sequence[Item]) -> list[Update]:
    """``items`` as updates in their order: runs of frames as `Sampled`, of records as `Summarized`."""
    out: list[Update] = []
    for item in items:
        if isinstance(item, SummaryRecord):
            if out and isinstance(out[-1], Summarized):
                out[-1] = Summarized(out[-1].records + (item,))
            else:
                out.append(Summarized((item,)))
        elif out and isinstance(out[-1], Sampled):
            out[-1] = Sampled(out[-1].frames + (item,))
        else:
            out.append(Sampled((item,)))
    return out


class AgentClient:
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
    ) -> None:
        self.request_deadline_s = request_deadline_s
        self.max_answer_bytes = max_answer_bytes
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # One context per CA file for the whole process, none loaded for http:// (see `tls_context`).
        self.tls_context = tls_context(self.url, ca_file)
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=headers, transport=transport,
            timeout=httpx.Timeout(request_timeout_s), verify=self.tls_context,
        )
        self._stream_timeout = httpx.Timeout(request_timeout_s, read=stream_read_timeout_s)
        self.backoff = backoff or Backoff()
        self.backfill_frames = backfill_frames
        self._sleep = sleep
        self.control_token = control_token
        self.run_id: str | None = None
        self.last_seq: int | None = None
        self.last_taken_at: float | None = None
        self.interval_s = 1.0
        self.view: View = view
        self._view_changed = asyncio.Event()
        # The seq whose frame is fetched again whole after a switch to full frames (the
        # summary record of it left the node screen without its full readings).
        self._again_seq: int | None = None

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

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _get(self, path: str, params: dict[str, str] | None = None) -> bytes:
        try:
            async with asyncio.timeout(self.request_deadline_s):
                async with self._http.stream("GET", path, params=params) as response:
                    body = await _read_bounded(response, self.max_answer_bytes)
        except httpx.HTTPError as exc:
            raise AgentError(_reason(exc)) from None
        except TimeoutError:
            raise AgentError(f"answer took longer than {self.request_deadline_s:g} s") from None
        if response.status_code != 200:
            raise _status_error(response, body)
        return body

    async def info(self) -> Info:
        """GET /v1/info.

        Raises:
            AgentError: unreachable, an HTTP error status, or an answer that is not
                an `Info` of this schema version.
        """
        try:
            return decode_agent(Info, await self._get("/v1/info"))
        except SchemaError as exc:
            raise AgentError(f"bad answer: {exc}") from None

    async def latest(self) -> Frame | None:
        """GET /v1/latest; ``None`` when the agent has not sampled yet."""
        try:
            return _check_frame(decode_agent(Frame, await self._get("/v1/latest")))
        except AgentError as exc:
            if exc.status == 503:
                return None
            raise
        except SchemaError as exc:
            raise AgentError(f"bad answer: {exc}") from None

    async def alarms(self) -> AlarmList:
        """GET /v1/alarms: the node's active and recently resolved alarms.

        Raises:
            AgentError: unreachable, an HTTP error (404 when the agent runs no alarms), or
                a bad answer.
        """
        try:
            return decode_agent(AlarmList, await self._get("/v1/alarms"))
        except SchemaError as exc:
            raise AgentError(f"bad answer: {exc}") from None

    async def acknowledge(self, alarm_id: str, by: str) -> Alarm:
        """POST /v1/alarms/{id}/ack with the control token; returns the alarm as it is now.

        Raises:
            AgentError: no control token here (status 403), the agent refused (401 wrong
                token, 403 read-only agent or read token, 404 unknown id, 409 already
                resolved), unreachable, or a bad answer; ``reason`` says which.
        """
        return await self._control_post(f"/v1/alarms/{alarm_id}/ack", {"by": by}, Alarm)

    async def guard_command(self, action: str, by: str) -> GuardReading:
        """POST /v1/guard (``hold`` or ``release``) with the control token; returns the guard's state.

        Raises:
            AgentError: no control token here (403), the agent refused (401, 403, 404 when it
                runs no guard), unreachable, or a bad answer; ``reason`` says which.
        """
        return await self._control_post("/v1/guard", {"action": action, "by": by}, GuardReading)

    async def _control_post(self, path: str, body: dict[str, str], record: type[T]) -> T:
        """POST ``body`` to ``path`` with the control token; the answer decoded as ``record``."""
        if not self.control_token:
            raise AgentError("no control token for this node in the dashboard configuration", 403)
        try:
            response = await self._http.post(path, json=body, headers={"Authorization": f"Bearer {self.control_token}"})
        except httpx.HTTPError as exc:
            raise AgentError(_reason(exc)) from None
        if response.status_code != 200:
            raise _status_error(response, response.content)
        try:
            return decode_agent(record, response.content)
        except SchemaError as exc:
            raise AgentError(f"bad answer: {exc}") from None

    async def watch_alarms(self, wake: asyncio.Event,
                           interval_s: float | Callable[[], float]) -> AsyncIterator[AlarmList | Failed]:
        """Fetch /v1/alarms now, then every ``interval_s`` (or what it returns, asked after each
        fetch) or as soon as ``wake`` is set.

        The caller sets ``wake`` when a frame brings an ``alarm_*`` event, so a transition
        shows at once. Failures are yielded (and retried after the back-off); never raises.
        """
        while True:
            wake.clear()
            try:
                alarms = await self.alarms()
                self.backoff.reset()
                delay = interval_s() if callable(interval_s) else interval_s
                yield alarms
            except AgentError as exc:
                # An agent without alarms (404) will not grow them: ask rarely.
                poll_s = interval_s() if callable(interval_s) else interval_s
                delay = self.backoff.max_s if exc.status == 404 else max(poll_s, self.backoff.next())
                yield Failed(exc.reason, delay)
            try:
                await asyncio.wait_for(wake.wait(), delay)
            except TimeoutError:
                pass

    async def samples(self, since: int, run_id: str | None = None, limit: int | None = None,
                      view: View = "full") -> SamplesPage:
        """GET /v1/samples?since=SEQ: frames (or with ``view="summary"`` summary records; an
        agent without them sends frames) after ``since`` of run ``run_id``."""
        params = {"since": str(since)}
        if run_id is not None:
            params["run_id"] = run_id
        if limit is not None:
            params["limit"] = str(limit)
        if view != "full":
            params["view"] = view
        try:
            page = decode_agent(SamplesPage, await self._get("/v1/samples", params))
            for frame in page.frames:
                _check_frame(frame)
            for record in page.summaries:
                _check_record(record)
        except SchemaError as exc:
            raise AgentError(f"bad answer: {exc}") from None
        return page

    async def stream(self, after: int | None, run_id: str | None,
                     view: View = "full") -> AsyncGenerator[Frame | SummaryRecord | Gap, None]:
        """Open /v1/stream and yield frames (or summary records) and gaps until the agent closes it.

        Args:
            after: resume after this seq (sent as ``Last-Event-ID``); ``None`` starts at
                the newest frame.
            run_id: the agent run ``after`` belongs to.
            view: ``summary`` asks for summary records; an agent without them ignores it and
                sends frames, which are yielded as frames.

        Raises:
            AgentError: on any failure, including a bad event.
        """
        headers = {"Last-Event-ID": str(after)} if after is not None else {}
        params = {"run_id": run_id} if run_id is not None else {}
        if view != "full":
            params["view"] = view
        parser = SseParser()
        try:
            async with self._http.stream("GET", "/v1/stream", headers=headers, params=params,
                                         timeout=self._stream_timeout) as response:
                if response.status_code != 200:
                    raise _status_error(response, await _read_bounded(response, self.max_answer_bytes))
                async for line in _bounded_lines(response, MAX_EVENT_LINE_BYTES):
                    event = parser.feed(line)
                    if event is None:
                        continue
                    if event.event == "summary":
                        yield _check_record(decode_agent(SummaryRecord, event.data))
                    elif event.event == "frame":
                        yield _check_frame(decode_agent(Frame, event.data))
                    elif event.event == "gap":
                        yield decode_agent(Gap, event.data)
        except httpx.HTTPError as exc:
            raise AgentError(_reason(exc)) from None
        except SchemaError as exc:
            raise AgentError(f"bad answer: {exc}") from None

    def _track(self, items: Sequence[T]) -> tuple[T, ...]:
        """Remember where we are; drop frames (or summary records) we already have, except the
        frame asked for again whole after a switch to full frames."""
        fresh = []
        for item in items:
            f = _frame_of(item)  # type: ignore[arg-type]
            if f.run_id == self.run_id and self.last_seq is not None and f.seq <= self.last_seq:
                if not (f.seq == self._again_seq and isinstance(item, Frame)):
                    continue
                self._again_seq = None
            fresh.append(item)
        if fresh:
            last = _frame_of(fresh[-1])  # type: ignore[arg-type]
            if not (last.run_id == self.run_id and self.last_seq is not None and last.seq <= self.last_seq):
                self.run_id = last.run_id
                self.last_seq = last.seq
                self.last_taken_at = last.taken_at
        return tuple(fresh)

    async def history(self, from_at: float, to_at: float, series: Sequence[str] | None = None) -> History:
        """GET /v1/history: min/mean/max of ``series`` (all when ``None``) over a window, from
        the agent's journal (every frame for a short window, a downsampled tier for a long one),
        and the node's events in it.

        Raises:
            AgentError: unreachable, an HTTP error (404: the agent keeps no journal), or an
                answer that is not a `History` of this schema version.
        """
        params = {"from": repr(from_at), "to": repr(to_at)}
        if series:
            params["series"] = ",".join(series)
        body = await self._get("/v1/history", params)
        try:
            history = decode_agent(History, body)
        except SchemaError as exc:
            raise AgentError(f"bad answer: {exc}") from None
        if history.schema != SCHEMA_VERSION:
            raise AgentError(f"bad answer: schema version {history.schema}, this client speaks {SCHEMA_VERSION}")
        return history

    async def history_frames(self, from_at: float, to_at: float) -> tuple[Frame, ...]:
        """GET /v1/history?frames=1: the whole frames the agent's journal holds for a window."""
        body = await self._get("/v1/history", {"from": repr(from_at), "to": repr(to_at), "frames": "1"})
        try:
            return tuple(_check_frame(f) for f in decode_agent(History, body).frames)
        except SchemaError as exc:
            raise AgentError(f"bad answer: {exc}") from None

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
            for update in _updates(self._track(listed)):
                yield update
            if not page.more or not listed:
                return
            since = _frame_of(listed[-1]).seq

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
                self.backoff.reset()
            for update in _updates(items):
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
                                self.backoff.reset()
                                yield _updates(items)[0]
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
                # The agent closed the stream cleanly (shutting down): reconnect shortly.
                await self._sleep(self.backoff.initial_s)
            except AgentError as exc:
                delay = self.backoff.next()
                yield Failed(exc.reason, delay)
                await self._sleep(delay)
