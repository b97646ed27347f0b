"""Requests to one agent's /v1 API: the httpx client (TLS, token, timeouts), info, samples, history, the stream.

Every answer is decoded by `rigmon.cluster.sanitise.decode_agent` and checked for this client's
schema version; every failure becomes an `AgentError` (see `rigmon.cluster.agent_answers`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Literal

import httpx

from rigmon.cluster.agent_answers import (
    MAX_ANSWER_BYTES,
    MAX_EVENT_LINE_BYTES,
    AgentError,
    bounded_lines,
    check_frame,
    check_record,
    failure_reason,
    read_bounded,
    status_error,
)
from rigmon.cluster.backoff import Backoff
from rigmon.cluster.sanitise import decode_agent
from rigmon.cluster.sse import SseParser
from rigmon.cluster.tls import tls_context
from rigmon.schema import SCHEMA_VERSION, Frame, Gap, History, Info, SchemaError
from rigmon.summary import SummaryRecord

View = Literal["full", "summary"]

#: How a connection breaks under a request before any answer (a reset, or closed without a
#: response): `AgentRequests._get` asks once more.
_LOST_BEFORE_ANSWER = (httpx.ReadError, httpx.RemoteProtocolError, httpx.WriteError)

#: A stream silent for this long (no frame, no keep-alive) is dropped and reopened; the
#: agent sends a keep-alive comment every 15 s.
STREAM_READ_TIMEOUT_S = 20.0
#: Longest time one ordinary request may take in all, however steadily the bytes trickle in
#: (the read timeout only bounds the silence between two of them).
REQUEST_DEADLINE_S = 30.0


@dataclass(frozen=True, slots=True)
class SamplesPage:
    """One /v1/samples answer."""

    run_id: str
    frames: tuple[Frame, ...]
    gap: Gap | None = None
    more: bool = False
    summaries: tuple[SummaryRecord, ...] = ()


class AgentRequests:
    """The requests `rigmon.cluster.client.AgentClient` makes of one agent, each on its own.

    Args:
        url: the agent's base URL (``http://host:9871``).
        token: bearer token, or ``None``.
        control_token: token that may acknowledge alarms, or ``None``.
        transport: httpx transport (tests pass ``httpx.MockTransport``).
        request_timeout_s: connect and read timeout of ordinary requests.
        stream_read_timeout_s: longest silence tolerated on the stream.
        backoff: retry delays while the agent is unreachable.
        ca_file: PEM CA certificate(s) to verify an ``https://`` agent with (default: httpx's
            CA bundle, certifi's or ``SSL_CERT_FILE``/``SSL_CERT_DIR``).
        request_deadline_s: longest time one ordinary request may take in all.
        max_answer_bytes: largest answer accepted; longest stream line is `MAX_EVENT_LINE_BYTES`.
        token_from: where ``token`` was given (``--token-file /path``, or the dashboard's config
            file and node entry): a 401 says to check it there.
        token_where: where a read token for this agent would be given: a 401 to a request without
            one says to give it there (`rigmon.cluster.agent_answers.status_error`).
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
        ca_file: str | None = None,
        request_deadline_s: float = REQUEST_DEADLINE_S,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        token_from: str | None = None,
        token_where: str | None = None,
    ) -> None:
        self.request_deadline_s = request_deadline_s
        self.token_from = token_from
        self.token_where = token_where
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
        self.control_token = control_token

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _get(self, path: str, params: dict[str, str] | None = None) -> bytes:
        """GET ``path``: the answer's body; asked once more when the connection broke before any
        answer began (`_LOST_BEFORE_ANSWER`).

        An idle kept-alive connection is closed by the agent's server after 5 s (uvicorn's
        default); the alarm polls come every 10 s, so a request can go out on a connection the
        agent is closing at that moment and get no answer at all. A GET changes nothing: asking
        again on a new connection is safe, and a node whose agent really went fails again there.
        """
        try:
            async with asyncio.timeout(self.request_deadline_s):
                for again in (True, False):
                    answering = False
                    try:
                        async with self._http.stream("GET", path, params=params) as response:
                            answering = True
                            body = await read_bounded(response, self.max_answer_bytes)
                        break
                    except _LOST_BEFORE_ANSWER:
                        if answering or not again:
                            raise
        except httpx.HTTPError as exc:
            raise AgentError(failure_reason(exc)) from None
        except TimeoutError:
            raise AgentError(f"answer took longer than {self.request_deadline_s:g} s") from None
        if response.status_code != 200:
            raise status_error(response, body, self.token_from, self.token_where)
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
            return check_frame(decode_agent(Frame, await self._get("/v1/latest")))
        except AgentError as exc:
            if exc.status == 503:
                return None
            raise
        except SchemaError as exc:
            raise AgentError(f"bad answer: {exc}") from None

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
                check_frame(frame)
            for record in page.summaries:
                check_record(record)
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
                    raise status_error(response, await read_bounded(response, self.max_answer_bytes), self.token_from,
                                       self.token_where)
                async for line in bounded_lines(response, MAX_EVENT_LINE_BYTES):
                    event = parser.feed(line)
                    if event is None:
                        continue
                    if event.event == "summary":
                        yield check_record(decode_agent(SummaryRecord, event.data))
                    elif event.event == "frame":
                        yield check_frame(decode_agent(Frame, event.data))
                    elif event.event == "gap":
                        yield decode_agent(Gap, event.data)
        except httpx.HTTPError as exc:
            raise AgentError(failure_reason(exc)) from None
        except SchemaError as exc:
            raise AgentError(f"bad answer: {exc}") from None

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
            return tuple(check_frame(f) for f in decode_agent(History, body).frames)
        except SchemaError as exc:
            raise AgentError(f"bad answer: {exc}") from None
