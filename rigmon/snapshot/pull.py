"""Pull each node's part of a bundle from its running agent over HTTP (a journal on disk alone:
`rigmon.snapshot.journal_part`)."""

from __future__ import annotations

import asyncio
import json
import math
import ssl
import time
import zlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
import msgspec

from rigmon.agent.history_answers import FRAMES_HEADER, LAST_FRAME_HEADER, UNREADABLE_HEADER
from rigmon.agent.journal import gzip_member
from rigmon.http_errors import describe_http_error
from rigmon.redact import redact_urls
from rigmon.schema import Alarm, AlarmList, Info, NodeCapture, SchemaError, decode
from rigmon.snapshot.bundle import NodePart
from rigmon.snapshot.failures import pull_failed
from rigmon.snapshot.gpus_gone_read import gone_from_agent
from rigmon.snapshot.history_decode import decode_history, history_of
# Callers import it from here, where it lived before the journal's reading had a module of its own.
from rigmon.snapshot.journal_part import read_journal as read_journal
from rigmon.snapshot.progress import STEPS_PER_NODE, Progress, counted
from rigmon.snapshot.window_events import add_carried_events

#: Seconds of frames asked for per /v1/history?frames=1 request (the most the agent serves).
FRAMES_CHUNK_S = 3600.0
HTTP_TIMEOUT_S = 30.0
#: Times an export the agent refused because it serves others (503 with ``Retry-After``) is asked
#: for again, after the wait it gave (at most `MAX_RETRY_WAIT_S`).
EXPORT_RETRIES = 4
MAX_RETRY_WAIT_S = 30.0


async def pull_agent(client: httpx.AsyncClient, url: str, since_s: float, progress: Progress | None = None,
                     note: Callable[[str, str], None] | None = None,
                     sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                     now: Callable[[], float] = time.time, token_from: str | None = None,
                     token_where: str | None = None) -> NodePart:
    """Pull a node's part from its agent: info, capture, history and frames of the window.

    The window ends at the node's latest frame (its own clock), so clock skew between the
    node and this machine does not move it. Failures are recorded in ``error`` (why, then what the
    bundle lacks for it); what was pulled before them is kept. An export the agent refuses because it serves others (503
    with ``Retry-After``) is asked for again after the wait, up to `EXPORT_RETRIES` times;
    each wait is said to ``note`` (node, text) or, without it, to ``progress``. The capture's
    arrival by ``now`` (this machine's clock) and its ``taken_at`` (the agent's) are kept as
    ``pulled_at`` and ``agent_now_at``. ``token_from`` is where the client's token was given
    (`rigmon.cluster.config.NodeTarget.token_from`): a 401 says to check it there; ``token_where`` is
    where a read token would be given when none was (see `rigmon.http_errors.describe_http_error`).
    """
    url = url.rstrip("/")
    # A user and password in the URL (an agent behind a proxy that asks for them) are sent, never written:
    # the bundle and what is said of the node name it by scheme, host and port.
    shown = redact_urls(url)
    part = NodePart(node=shown, source=shown)
    tick: Callable[[str], None] = (lambda what: progress.step(part.node, what)) if progress else (lambda what: None)
    said = note or (progress.note if progress else (lambda node, what: None))
    retries = _ExportRetries(client, lambda what: said(part.node, what), sleep)
    steps_left = STEPS_PER_NODE
    try:
        part.info = decode(Info, (await _get(client, f"{url}/v1/info")).content)
        part.node = part.info.node
        steps_left -= 1
        tick("info")
        answer = await retries.get(f"{url}/v1/snapshot")
        pulled_at = now()
        capture = decode(NodeCapture, answer.content)
        part.pulled_at, part.agent_now_at = pulled_at, capture.taken_at
        part.config = capture.config
        part.latest = capture.latest
        part.files = capture.files
        part.capture_errors = list(capture.errors)
        steps_left -= 1
        tick(f"{counted(len(capture.files), 'file')} captured")
        part.alarms = await _active_alarms(client, url)
        part.to_at = capture.latest.taken_at if capture.latest else capture.taken_at
        part.from_at = part.to_at - since_s
        window = {"from": repr(part.from_at), "to": repr(part.to_at)}
        resp = await client.get(f"{url}/v1/history", params=window)
        if resp.status_code in (404, 503):
            # No journal (disabled), or one that cannot be read now: the frames the agent keeps in
            # memory (its ring buffer, this run's) still hold the last minutes, the incident's.
            why = _error_text(resp)
            steps_left -= 1
            tick("no journal")
            frames = await _ring_frames(client, url, part.from_at, part.to_at)
            part.history = history_of(part.node, part.from_at, part.to_at, part.info.interval_s, frames)
            part.frames_gz = gzip_member(b"".join(raw + b"\n" for _, raw in frames)) if frames else b""
            part.frame_count = len(frames)
            what = "no journal on the agent" if resp.status_code == 404 else "the agent's journal cannot be read"
            part.error = (f"{what}: {why}; the bundle holds the {len(frames)} frames of the window it keeps in "
                          "memory (its current run), with their events")
            steps_left -= 1
            tick(f"{part.frame_count} frames from memory")
            return part
        resp.raise_for_status()
        part.history = decode_history(resp.content)
        part.history_json = resp.content
        series_left_out = _unreadable_parts(resp)
        steps_left -= 1
        tick(f"{counted(len(part.history.series), 'series')}, {counted(len(part.history.events), 'event')}")
        part.frames_gz, part.frame_count, frames_left_out = await _pull_frames(retries, url, part.from_at,
                                                                               part.to_at)
        # The events of the window's last frames can be stamped after it ends (the latest frame's time).
        add_carried_events(part)
        await _add_gpus_gone(client, url, part)
        steps_left -= 1
        tick(counted(part.frame_count, "frame"))
        if series_left_out or frames_left_out:
            part.error = (f"the agent's journal is damaged: stored parts of the window that do not decompress "
                          f"were left out ({series_left_out} of the series, {frames_left_out} of the frames)")
    except httpx.HTTPError as exc:
        why = _without_userinfo(describe_http_error(exc, token_from, token_where), url)
        return pull_failed(part, why + retries.gave_up(exc), progress, steps_left)
    except (SchemaError, ValueError) as exc:
        return pull_failed(part, f"not a rigmon agent of this version (bad answer: {exc})", progress, steps_left)
    return part


async def _add_gpus_gone(client: httpx.AsyncClient, url: str, part: NodePart) -> None:
    """Fill ``part.gpus_gone`` from the agent's journal; what cannot be asked is said in the node's
    ``captures/ERRORS.txt`` (the rest of the bundle does not depend on it)."""
    if part.info is None or part.to_at is None:
        return
    try:
        part.gpus_gone, part.gpus_gone_from_at = await gone_from_agent(
            client, url, part.latest, part.to_at, part.info.interval_s, part.config)
    except (httpx.HTTPError, SchemaError, ValueError) as exc:
        part.capture_errors.append(f"GPUs gone before the window: the agent's journal could not be asked ({exc})")


def _without_userinfo(text: str, url: str) -> str:
    """``text`` without the user and password of ``url`` (an error names the address it failed at)."""
    userinfo = urlsplit(url).netloc.rpartition("@")[0]
    return text.replace(f"{userinfo}@", "") if userinfo else text


class _Samples(msgspec.Struct):
    """A /v1/samples answer: its frames kept as their wire JSON."""

    frames: list[msgspec.Raw] = msgspec.field(default_factory=list)
    more: bool = False


class _FrameHead(msgspec.Struct):
    seq: int
    taken_at: float


_samples_decoder = msgspec.json.Decoder(_Samples)
_head_decoder = msgspec.json.Decoder(_FrameHead)


async def _active_alarms(client: httpx.AsyncClient, url: str) -> tuple[Alarm, ...] | None:
    """The agent's pending and firing alarms (an incident older than the window is still firing);
    ``None`` when it has no alarms or does not answer (the rest of the pull goes on)."""
    try:
        resp = await client.get(f"{url}/v1/alarms")
        if resp.status_code != 200:
            return None
        return decode(AlarmList, resp.content).active
    except (httpx.HTTPError, SchemaError, ValueError):
        return None


def _error_text(resp: httpx.Response) -> str:
    try:
        return str(resp.json().get("error"))
    except (ValueError, AttributeError):
        return f"HTTP {resp.status_code}"


async def _ring_frames(client: httpx.AsyncClient, url: str, from_at: float, to_at: float
                       ) -> list[tuple[float, bytes]]:
    """The frames of ``[from_at, to_at]`` still in the agent's ring buffer (``/v1/samples``), oldest first."""
    out: list[tuple[float, bytes]] = []
    since = 0
    while True:
        resp = await client.get(f"{url}/v1/samples", params={"since": str(since)})
        resp.raise_for_status()
        answer = _samples_decoder.decode(resp.content)
        for raw in answer.frames:
            head = _head_decoder.decode(raw)
            since = max(since, head.seq)
            if from_at <= head.taken_at <= to_at:
                out.append((head.taken_at, bytes(raw)))
        if not answer.more or not answer.frames:
            return out




class _ExportRetries:
    """GETs of exports (``/v1/snapshot``, ``/v1/history?frames=1``) asked for again while the agent
    refuses them because it serves others (503 with ``Retry-After``), up to `EXPORT_RETRIES` times."""

    def __init__(self, client: httpx.AsyncClient, note: Callable[[str], None],
                 sleep: Callable[[float], Awaitable[None]]) -> None:
        self.client = client
        self.note = note
        self.sleep = sleep
        self.last_refused: httpx.Response | None = None

    async def get(self, url: str, **kwargs: Any) -> httpx.Response:
        """The answer (raised for its status), after any waits the agent asked for.

        Raises:
            httpx.HTTPError: unreachable, or an error status (the last 503 when it stayed busy).
        """
        for attempt in range(EXPORT_RETRIES + 1):
            resp = await self.client.get(url, **kwargs)
            wait_s = _retry_after_s(resp) if resp.status_code == 503 else None
            if wait_s is None or attempt == EXPORT_RETRIES:
                break
            self.last_refused = resp
            self.note(f"the agent is busy with other exports (503); asking again in {wait_s:g} s "
                      f"(retry {attempt + 1} of {EXPORT_RETRIES})")
            await self.sleep(wait_s)
        resp.raise_for_status()
        return resp

    def gave_up(self, exc: httpx.HTTPError) -> str:
        """What to add to the reason of a failed pull when it was the agent staying busy."""
        if isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code == 503 \
                and _retry_after_s(exc.response) is not None:
            return f" (asked {EXPORT_RETRIES + 1} times, waiting as it said in between; take the snapshot again later)"
        return ""


def _retry_after_s(resp: httpx.Response) -> float | None:
    """Seconds of the answer's ``Retry-After`` (its HTTP-date form taken as absent), at most `MAX_RETRY_WAIT_S`."""
    try:
        wait_s = float(resp.headers.get("retry-after", ""))
    except ValueError:
        return None
    return min(MAX_RETRY_WAIT_S, wait_s) if math.isfinite(wait_s) and wait_s >= 0 else None


async def _get(client: httpx.AsyncClient, url: str) -> httpx.Response:
    resp = await client.get(url)
    resp.raise_for_status()
    return resp


def _unreadable_parts(resp: httpx.Response) -> int:
    """How many stored parts of the window the agent left out of a /v1/history answer (damage in its journal)."""
    try:
        return max(0, int(resp.headers.get(UNREADABLE_HEADER, "0")))
    except ValueError:
        return 0


async def _pull_frames(retries: _ExportRetries, url: str, from_at: float,
                       to_at: float) -> tuple[bytes, int, int]:
    """The window's frames as gzip members of JSON lines, how many there are, and how many stored
    parts of the window the agent left out because they do not decompress (summed over its answers).

    The agent answers ``application/gzip``: its journal's blocks as stored, which go into
    the bundle as they are (nothing is decompressed or re-encoded here). An agent that
    answers plain JSON lines has them compressed here.
    """
    members: list[bytes] = []
    count = 0
    left_out = 0
    start = from_at
    while start <= to_at:
        end = min(to_at, start + FRAMES_CHUNK_S)
        resp = await retries.get(f"{url}/v1/history", params={"from": repr(start), "to": repr(end), "frames": "1"},
                                 headers={"Accept": "application/gzip, application/x-ndjson;q=0.5"})
        left_out += _unreadable_parts(resp)
        if resp.headers.get("content-type", "").startswith("application/gzip"):
            # The first member is the History line; the rest are the frames.
            dec = zlib.decompressobj(31)
            head = dec.decompress(resp.content)
            if not dec.eof:
                raise ValueError("gzip answer without a complete first line")
            body = dec.unused_data
            n = int(resp.headers.get(FRAMES_HEADER, "0"))
            last = resp.headers.get(LAST_FRAME_HEADER)
        else:
            head, *chunk = resp.content.splitlines()
            body = gzip_member(b"".join(line + b"\n" for line in chunk)) if chunk else b""
            n = len(chunk)
            last = repr(json.loads(chunk[-1])["taken_at"]) if chunk else None
        members.append(body)
        count += n
        if json.loads(head).get("more") and n and last is not None:
            start = math.nextafter(float(last), math.inf)
        else:
            start = math.nextafter(end, math.inf)
    return b"".join(members), count, left_out


async def pull_agents(urls: Sequence[str], since_s: float, token: str | None = None,
                      progress: Progress | None = None, ca_file: str | None = None,
                      token_from: str | None = None) -> list[NodePart]:
    """Pull every agent concurrently; parts come back in the order of ``urls``.

    ``ca_file`` holds the CA certificate(s) that ``https://`` agents are verified with; ``token_from``
    says where ``token`` was given (``--token-file /path``), for a refused token's sentence.
    """
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca_file) if ca_file else True
    async with httpx.AsyncClient(headers=headers, timeout=HTTP_TIMEOUT_S, verify=verify) as client:
        return list(await asyncio.gather(*(pull_agent(client, u, since_s, progress, token_from=token_from)
                                           for u in urls)))

