"""The agent's HTTP API (/healthz, /v1/*) as a Starlette application."""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import msgspec

from rigmon.agent.alarming import AlarmService
from rigmon.agent.control import MAX_ACK_BY_CHARS, BadRequest, checked_text, control_denied, json_body
from rigmon.agent.buffer import FrameBuffer
from rigmon.agent.exports import UNCAPPED_FRAMES_SPAN_S, ExportSlots, SpooledResponse
from rigmon.agent.frame_json import frame_json, summary_json
from rigmon.agent.history_answers import (
    DEFAULT_HISTORY_SPAN_S,
    MAX_HISTORY_FRAMES_SPAN_S,
    UNREADABLE_HEADER,
    FramesShape,
    empty_history_answer,
    frames_answer,
    history_body,
)
from rigmon.agent.journal import JournalError
from rigmon.agent.journal.layout import read_error
from rigmon.agent.metrics import FrameCollector
from rigmon.agent.metrics_exposition import Exposition
from rigmon.agent.ratelimit import RateLimiter
from rigmon.agent.request_guard import (
    ASGIApp,
    Receive,
    RequestTooLarge,
    Scope,
    Send,
    closing_error_response,
    error_response,
    guard_requests,
)
from rigmon.alarms.lifecycle import AlreadyResolved, UnknownAlarm
from rigmon.lazy_re import lazy_compile
from rigmon.schema import CollectorStatus, Event, Frame, Gap, Info, NodeCapture, encode

#: Seconds between SSE keep-alive comments, so proxies and clients see a live stream.
KEEPALIVE_S = 15.0
#: What ``view`` of /v1/stream and /v1/samples selects: each frame whole (the default), or its
#: `rigmon.summary.SummaryRecord` (what a dashboard needs of a node it does not show).
VIEWS = ("full", "summary")
#: Most frames one /v1/samples answer carries.
MAX_SAMPLES_PER_REQUEST = 1000
#: Most frames of a /v1/samples answer built whole (a dashboard's pull of the newest); more are sent
#: in pieces of about `ANSWER_CHUNK_BYTES` as the client reads them (`answer_chunks`).
WHOLE_ANSWER_FRAMES = 8
ANSWER_CHUNK_BYTES = 256 * 1024
OPENAPI_PATH = Path(__file__).with_name("openapi.json")

class ApiState(msgspec.Struct):
    """What the handlers read: the buffer, identity and limits."""

    buffer: FrameBuffer
    info: Callable[[], Info]
    token: str | None
    max_streams: int
    max_request_bytes: int
    metrics: FrameCollector | None = None
    """The agent's metrics; how they are rendered is built on the first scrape (`exposition`)."""
    exposition: Exposition | None = None
    keepalive_s: float = KEEPALIVE_S
    open_streams: int = 0
    alarms: AlarmService | None = None
    control_token: str | None = None
    journal_path: Path | None = None
    journal_status: Callable[[], CollectorStatus] | None = None
    interval_s: float = 1.0
    now: Callable[[], float] | None = None
    capture: Callable[[], NodeCapture] | None = None
    rate_limiter: RateLimiter | None = None
    mark: Callable[[str, str | None], Event] | None = None
    extra_routes: list[Route] = msgspec.field(default_factory=list)
    """Routes of optional parts (``/v1/guard``), added after the built-in ones."""
    exports: ExportSlots = msgspec.field(default_factory=ExportSlots)
    """Exports being served, at most `rigmon.agent.exports.MAX_EXPORTS` at once."""


def _json(record: Any) -> Response:
    return Response(encode(record), media_type="application/json")


#: Most characters of a refused value quoted back in the reason (a 60 kB query is not echoed whole).
SHOWN_CHARS = 40


def _shown(value: str) -> str:
    """``value`` quoted for a reason, cut to `SHOWN_CHARS` with its length said."""
    if len(value) <= SHOWN_CHARS:
        return repr(value)
    return f"{value[:SHOWN_CHARS]!r}... ({len(value)} characters)"


#: What a client writes for a number (ASCII digits, at most 64 bits of them): Python's own ``int``
#: and ``float`` also take ``１`` (full width), ``+5``, ``1_000``, `` 5 `` and ``nan``.
_INT_TEXT = lazy_compile(r"-?[0-9]{1,19}")
_FLOAT_TEXT = lazy_compile(r"-?(?:[0-9]{1,20}(?:\.[0-9]{0,20})?|\.[0-9]{1,20})(?:[eE][-+]?[0-9]{1,3})?")


def _int_param(value: str | None, name: str, minimum: int = 0) -> int | None:
    if value is None:
        return None
    if not _INT_TEXT.fullmatch(value):
        raise BadRequest(f"{name} must be an integer, got {_shown(value)}")
    number = int(value)
    if number < minimum:
        raise BadRequest(f"{name} must be at least {minimum}, got {number}")
    return number


def _float_param(value: str | None, name: str) -> float | None:
    if value is None:
        return None
    if not _FLOAT_TEXT.fullmatch(value):
        raise BadRequest(f"{name} must be Unix seconds, got {_shown(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise BadRequest(f"{name} must be a finite number, got {_shown(value)}")
    return number


def resume_plan(buffer: FrameBuffer, after_seq: int, run_id: str | None, own_run_id: str) -> tuple[int, Gap | None]:
    """Where a resuming reader starts and which frames it has lost.

    Args:
        buffer: the agent's frames.
        after_seq: the last seq the reader has.
        run_id: the run the reader's seq belongs to, if it says.
        own_run_id: this agent run.

    Returns:
        The seq to read after, and a `Gap` when frames the reader wanted are gone.
    """
    oldest = buffer.oldest_seq
    latest = buffer.latest.seq if buffer.latest else 0
    if run_id not in (None, own_run_id) or after_seq > latest:
        # The reader's seq belongs to an earlier run of the agent: its frames are gone.
        start = (oldest or 1) - 1
        return start, Gap(run_id=own_run_id, from_seq=1, to_seq=start, reason="agent restarted") if start else None
    if oldest is not None and after_seq + 1 < oldest:
        return oldest - 1, Gap(run_id=own_run_id, from_seq=after_seq + 1, to_seq=oldest - 1,
                               reason="frames no longer in the agent's buffer")
    return after_seq, None


async def answer_chunks(head: bytes, frames: list[Frame], wire: Callable[[Frame], bytes],
                        tail: bytes) -> AsyncIterator[bytes]:
    """A /v1/samples answer of many frames in pieces of about `ANSWER_CHUNK_BYTES`.

    Each piece waits until the client has taken the ones before (uvicorn's flow control), so a client
    that does not read holds one piece, not the whole answer: 1000 frames of an 8-GPU node are ~30 MB,
    and 16 connections of one address each asking for them and never reading held them all at once.
    """
    parts = [head]
    size = len(head)
    for index, frame in enumerate(frames):
        piece = wire(frame)
        parts.append(b"," + piece if index else piece)
        size += len(piece) + 1
        if size >= ANSWER_CHUNK_BYTES:
            yield b"".join(parts)
            parts, size = [], 0
    parts.append(tail)
    yield b"".join(parts)


def _view_param(value: str | None) -> str:
    view = value or "full"
    if view not in VIEWS:
        raise BadRequest(f"view must be one of {', '.join(VIEWS)}, got {_shown(view)}")
    return view


def _sse(event: str, data: bytes, event_id: int | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\n".encode() + b"data: " + data + b"\n\n"


def build_app(state: ApiState) -> ASGIApp:
    """Build the ASGI application serving the agent's API.

    Every route but /healthz requires the bearer token when one is configured.
    """

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def info(request: Request) -> Response:
        return _json(state.info())

    async def latest(request: Request) -> Response:
        frame = state.buffer.latest
        if frame is None:
            return error_response(503, "no frame sampled yet")
        return Response(frame_json(frame), media_type="application/json")

    async def samples(request: Request) -> Response:
        since = _int_param(request.query_params.get("since"), "since") or 0
        limit = _int_param(request.query_params.get("limit"), "limit", minimum=1) or MAX_SAMPLES_PER_REQUEST
        limit = min(limit, MAX_SAMPLES_PER_REQUEST)
        view = _view_param(request.query_params.get("view"))
        own = state.info().run_id
        after, gap = resume_plan(state.buffer, since, request.query_params.get("run_id"), own)
        frames = state.buffer.since(after, limit)
        more = bool(frames) and state.buffer.latest is not None and frames[-1].seq < state.buffer.latest.seq
        # The frames' wire JSON is the cached one (`frame_json`), spliced in as it is.
        wire = summary_json if view == "summary" else frame_json
        head = b'{"run_id":' + json.dumps(own).encode() + (b',"frames":[],"summaries":[' if view == "summary"
                                                            else b',"frames":[')
        tail = (b'],"gap":' + (encode(gap) if gap else b"null")
                + b',"more":' + (b"true" if more else b"false") + b"}")
        if len(frames) <= WHOLE_ANSWER_FRAMES:
            return Response(head + b",".join(wire(f) for f in frames) + tail, media_type="application/json")
        return StreamingResponse(answer_chunks(head, frames, wire, tail), media_type="application/json")

    async def stream(request: Request) -> Response:
        last_id = request.headers.get("last-event-id") or request.query_params.get("since")
        after = _int_param(last_id, "Last-Event-ID")
        run_id = request.query_params.get("run_id")
        view = _view_param(request.query_params.get("view"))
        if state.open_streams >= state.max_streams:
            return error_response(503, f"too many open streams (limit {state.max_streams})")
        state.open_streams += 1
        return StreamingResponse(
            _stream_body(request, after, run_id, view),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def _stream_body(request: Request, after: int | None, run_id: str | None,
                           view: str) -> AsyncIterator[bytes]:
        # A summary stream sends each frame's summary record as event "summary", with the
        # frame's seq as its id, so resuming works the same for both views.
        event, body = ("summary", summary_json) if view == "summary" else ("frame", frame_json)
        try:
            own = state.info().run_id
            buffer = state.buffer
            if after is None:
                # A fresh subscriber starts from the newest frame.
                cursor = buffer.latest.seq - 1 if buffer.latest else 0
            else:
                cursor, gap = resume_plan(buffer, after, run_id, own)
                if gap is not None:
                    yield _sse("gap", encode(gap))
            while True:
                frames = buffer.since(cursor, 100)
                if frames and frames[0].seq != cursor + 1:
                    # The reader was slower than the ring buffer: say what it missed.
                    gap = Gap(run_id=own, from_seq=cursor + 1, to_seq=frames[0].seq - 1,
                              reason="reader fell behind the agent's buffer")
                    yield _sse("gap", encode(gap))
                for frame in frames:
                    yield _sse(event, body(frame), frame.seq)
                    cursor = frame.seq
                if frames:
                    continue
                if not await buffer.wait_after(cursor, state.keepalive_s):
                    if await request.is_disconnected():
                        return
                    yield b": keepalive\n\n"
        finally:
            state.open_streams -= 1

    async def metrics(request: Request) -> Response:
        if state.metrics is None:
            return error_response(404, "metrics are not enabled")
        # Built on the first scrape: see `rigmon.agent.metrics` (prometheus_client loads then).
        if state.exposition is None:
            state.exposition = Exposition(state.metrics)
        body, content_type = state.exposition.render(request.headers.get("accept", ""))
        return Response(body, media_type=content_type)

    async def alarms(request: Request) -> Response:
        if state.alarms is None:
            return error_response(404, "alarms are not enabled on this agent")
        return _json(state.alarms.alarm_list())

    async def ack(request: Request) -> Response:
        # The token first: a client without it must not learn which features are on (404).
        denied = _control_denied(state, request, "acknowledge alarms")
        if denied is not None:
            return denied
        if state.alarms is None:
            return error_response(404, "alarms are not enabled on this agent")
        by = "operator"
        body = await request.body()
        if body:
            data = json_body(body, '{"by": "alice"}')
            if not isinstance(data, dict) or not isinstance(data.get("by", ""), str):
                raise BadRequest("body must be a JSON object whose \"by\" is a string")
            by = checked_text((data.get("by") or by)[:MAX_ACK_BY_CHARS], MAX_ACK_BY_CHARS, "by")
        alarm_id = request.path_params["alarm_id"]
        try:
            alarm = state.alarms.acknowledge(alarm_id, by)
        except UnknownAlarm:
            return error_response(404, f"no alarm {alarm_id}")
        except AlreadyResolved:
            return error_response(409, f"alarm {alarm_id} is already resolved")
        return _json(alarm)

    async def marks(request: Request) -> Response:
        denied = _control_denied(state, request, "add marks")
        if denied is not None:
            return denied
        if state.mark is None:
            return error_response(404, "marks are not enabled on this agent")
        data = json_body(await request.body(), '{"text": "epoch 3"}')
        if not isinstance(data, dict) or not isinstance(data.get("text"), str):
            raise BadRequest('body must be a JSON object whose "text" is a string')
        by = data.get("by")
        if by is not None and not isinstance(by, str):
            raise BadRequest('"by" must be a string')
        text = checked_text(data["text"])
        event = state.mark(text, None if by is None else checked_text(by, MAX_ACK_BY_CHARS, "by"))
        return Response(encode(event), status_code=201, media_type="application/json")

    async def history(request: Request) -> Response:
        if state.journal_path is None:
            return error_response(404, "this agent keeps no journal (no state directory, or [journal] enabled = false)")
        q = request.query_params
        unknown = sorted(set(q) - {"from", "to", "series", "frames"})
        if unknown:
            raise BadRequest(f"unknown parameter {_shown(unknown[0])} (known: from, to, series, frames)")
        now = state.now() if state.now is not None else 0.0
        to_at = _float_param(q.get("to"), "to")
        to_at = now if to_at is None else to_at
        from_at = _float_param(q.get("from"), "from")
        from_at = to_at - DEFAULT_HISTORY_SPAN_S if from_at is None else from_at
        if from_at > to_at:
            raise BadRequest(f"from ({from_at}) is after to ({to_at})")
        frames_flag = q.get("frames", "0")
        if frames_flag not in ("0", "1"):
            raise BadRequest(f"frames must be 0 or 1, got {_shown(frames_flag)}")
        with_frames = frames_flag == "1"
        if with_frames and to_at - from_at > MAX_HISTORY_FRAMES_SPAN_S:
            raise BadRequest(f"frames=1 covers at most {MAX_HISTORY_FRAMES_SPAN_S:g} s; ask for the window in parts")
        names: set[str] | None = None
        if "series" in q:
            names = {n.strip() for n in q["series"].split(",") if n.strip()}
            if not names:
                raise BadRequest("series must name at least one series")
        accept = request.headers.get("accept", "")
        gzipped = with_frames and "application/gzip" in accept
        lines = with_frames and "application/x-ndjson" in accept
        # Read before the attempt: the writer may open the file while it runs.
        unopened = state.journal_status is not None and state.journal_status().state == "pending"
        # A short window (a dashboard filling a gap in its stream) is no export: bounded, and
        # refused it would be shown as frames lost.
        capped = with_frames and to_at - from_at > UNCAPPED_FRAMES_SPAN_S
        if capped and not state.exports.take():
            return state.exports.refusal()
        slot = capped  # held until given back below, or handed to the streamed answer
        try:
            if with_frames:
                shape: FramesShape = "gzip" if gzipped else "lines" if lines else "json"
                answer = await asyncio.to_thread(frames_answer, state.journal_path, state.info().node, from_at,
                                                 to_at, state.interval_s, names, shape)
                slot = False
                # Sent as the client reads (like a long /v1/samples): the frames wait in the spool.
                return SpooledResponse(answer, state.exports if capped else None)
            body, unreadable = await asyncio.to_thread(history_body, state.journal_path, state.info().node,
                                                       from_at, to_at, state.interval_s, names)
        except (sqlite3.Error, zlib.error, ValueError, OSError, EOFError) as exc:
            # A journal damaged under the reader (bad pages, a body that does not decode): the
            # writer sets it aside; until then the answer is the documented 503, never a 500.
            return error_response(503, read_error(state.journal_path, exc))
        except JournalError as exc:
            if not unopened:
                return error_response(503, str(exc))
            # Just after the start the writer has not created the file (or its tables) yet:
            # nothing is recorded, which is an empty window, not an outage (a snapshot taken
            # then would otherwise lose the node). A journal that failed to open still says 503.
            empty = empty_history_answer(state.info().node, from_at, to_at, state.interval_s, lines, gzipped)
            return Response(empty.body, media_type=empty.media_type, headers=empty.headers)
        finally:
            if slot:
                state.exports.give()
        return Response(body, media_type="application/json",
                        headers={UNREADABLE_HEADER: str(unreadable)} if unreadable else None)

    async def snapshot(request: Request) -> Response:
        if state.capture is None:
            return error_response(404, "this agent cannot capture a snapshot")
        if not state.exports.take():
            return state.exports.refusal()
        try:
            return _json(await asyncio.to_thread(state.capture))
        finally:
            state.exports.give()

    async def openapi(request: Request) -> Response:
        return Response(await asyncio.to_thread(OPENAPI_PATH.read_bytes), media_type="application/json")

    routes = [
        Route("/healthz", healthz),
        Route("/v1/openapi.json", openapi),
        Route("/metrics", metrics),
        Route("/v1/alarms", alarms),
        Route("/v1/alarms/{alarm_id}/ack", ack, methods=["POST"]),
        Route("/v1/marks", marks, methods=["POST"]),
        Route("/v1/info", info),
        Route("/v1/latest", latest),
        Route("/v1/samples", samples),
        Route("/v1/stream", stream),
        Route("/v1/history", history),
        Route("/v1/snapshot", snapshot),
        *state.extra_routes,
    ]

    async def on_bad_request(request: Request, exc: Exception) -> Response:
        return error_response(400, str(exc))

    async def on_too_large(request: Request, exc: Exception) -> Response:
        return closing_error_response(413, str(exc))

    async def on_http_error(request: Request, exc: Exception) -> Response:
        # Starlette's own 404/405 are plain text; every answer of the API is JSON.
        assert isinstance(exc, HTTPException)
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    app = Starlette(routes=routes, exception_handlers={
        BadRequest: on_bad_request, RequestTooLarge: on_too_large, HTTPException: on_http_error})
    return guard_requests(app, state)


def _control_denied(state: ApiState, request: Request, what: str) -> Response | None:
    """The answer refusing a control request, or ``None`` when it carries the control token."""
    return control_denied(state.control_token, state.token, request, what)
