"""Pull each node's part of a bundle: from running agents over HTTP, or from a journal on disk."""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
import ssl
import sys
import time
import zlib
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import IO, Any

import httpx
import msgspec
from msgspec.structs import replace

from rigmon.agent.history_answers import FRAMES_HEADER, LAST_FRAME_HEADER, UNREADABLE_HEADER
from rigmon.agent.journal import JournalError, JournalReader, gzip_member, journal_path
from rigmon.agent.journal.layout import FORMAT_VERSION
from rigmon.agent.journal.read_only import check_journal_file
from rigmon.agent.journal.salvage import salvage
from rigmon.cluster.sanitise import clean_text
from rigmon.http_errors import describe_http_error
from rigmon.redact import redact
from rigmon.schema import (
    SCHEMA_VERSION,
    Alarm,
    AlarmList,
    Event,
    History,
    HistorySeries,
    Info,
    NodeCapture,
    SchemaError,
    decode,
    decode_data,
)
from rigmon.series import frame_series
from rigmon.snapshot.bundle import NodePart
from rigmon.snapshot.saved_alarms import add_saved_alarms

#: Seconds of frames asked for per /v1/history?frames=1 request (the most the agent serves).
FRAMES_CHUNK_S = 3600.0
HTTP_TIMEOUT_S = 30.0
#: Times an export the agent refused because it serves others (503 with ``Retry-After``) is asked
#: for again, after the wait it gave (at most `MAX_RETRY_WAIT_S`).
EXPORT_RETRIES = 4
MAX_RETRY_WAIT_S = 30.0


class Progress:
    """Progress of a pull over many nodes on a stream (stderr).

    On a terminal a bar is redrawn in place; otherwise each finished step is a plain line,
    so logs and CI output stay readable.
    """

    def __init__(self, total: int, stream: IO[str] | None = None, width: int = 30) -> None:
        self.total = max(1, total)
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def note(self, node: str, what: str) -> None:
        """Something worth saying about a node that is no step (a wait): a line of its own."""
        # On a terminal the bar's line is cleared first; the next step draws it again below.
        self.stream.write(("\r\x1b[K" if self.tty else "") + clean_text(f"{node}: {what}") + "\n")
        self.stream.flush()

    def step(self, node: str, what: str) -> None:
        """One step of one node finished."""
        self.done = min(self.total, self.done + 1)
        # The node's name and what it said come from the agent: text, never terminal control.
        node, what = clean_text(node), clean_text(what)
        if self.tty:
            filled = int(self.width * self.done / self.total)
            bar = "#" * filled + "-" * (self.width - filled)
            self.stream.write(f"\r[{bar}] {self.done}/{self.total} {node}: {what}\x1b[K")
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(f"[{self.done}/{self.total}] {node}: {what}\n")
        self.stream.flush()


#: Steps each node reports: info, capture, history, frames.
STEPS_PER_NODE = 4


async def pull_agent(client: httpx.AsyncClient, url: str, since_s: float, progress: Progress | None = None,
                     note: Callable[[str, str], None] | None = None,
                     sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                     now: Callable[[], float] = time.time) -> NodePart:
    """Pull a node's part from its agent: info, capture, history and frames of the window.

    The window ends at the node's latest frame (its own clock), so clock skew between the
    node and this machine does not move it. Failures are recorded in ``error``; what was
    pulled before them is kept. An export the agent refuses because it serves others (503
    with ``Retry-After``) is asked for again after the wait, up to `EXPORT_RETRIES` times;
    each wait is said to ``note`` (node, text) or, without it, to ``progress``. The capture's
    arrival by ``now`` (this machine's clock) and its ``taken_at`` (the agent's) are kept as
    ``pulled_at`` and ``agent_now_at``.
    """
    url = url.rstrip("/")
    part = NodePart(node=url, source=url)
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
        tick(f"{len(capture.files)} files captured")
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
            part.history = _history_of(part.node, part.from_at, part.to_at, part.info.interval_s, frames)
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
        tick(f"{len(part.history.series)} series, {len(part.history.events)} events")
        part.frames_gz, part.frame_count, frames_left_out = await _pull_frames(retries, url, part.from_at,
                                                                               part.to_at)
        steps_left -= 1
        tick(f"{part.frame_count} frames")
        if series_left_out or frames_left_out:
            part.error = (f"the agent's journal is damaged: stored parts of the window that do not decompress "
                          f"were left out ({series_left_out} of the series, {frames_left_out} of the frames)")
    except httpx.HTTPError as exc:
        part.error = describe_http_error(exc) + retries.gave_up(exc)
        for _ in range(steps_left):
            tick(f"failed: {part.error}")
    except (SchemaError, ValueError) as exc:
        part.error = f"not a rigmon agent of this version (bad answer: {exc})"
        for _ in range(steps_left):
            tick(f"failed: {part.error}")
    return part


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


def _history_of(node: str, from_at: float, to_at: float, interval_s: float,
                frames: Sequence[tuple[float, bytes]]) -> History:
    """The window's history made from whole frames (every frame a point), as an agent answers it."""
    columns: dict[str, tuple[list[float], list[float]]] = {}
    events: list[Event] = []
    for taken_at, raw in frames:
        data = json.loads(raw)
        for name, value in frame_series(data).items():
            col = columns.setdefault(name, ([], []))
            col[0].append(taken_at)
            col[1].append(value)
        events += [decode_data(Event, e) for e in data.get("events") or ()]
    series = {name: HistorySeries(at=tuple(at), min=tuple(v), mean=tuple(v), max=tuple(v))
              for name, (at, v) in sorted(columns.items())}
    return History(schema=SCHEMA_VERSION, node=node, from_at=from_at, to_at=to_at, tier="frames",
                   step_s=interval_s, series=series, events=tuple(events))


def decode_history(raw: bytes) -> History:
    """``decode(History, raw)`` with the series checked and built directly.

    The generic decoder walks every number of thousands of series (a large rig's hour);
    this checks the same shape (four lists of numbers of one length per series) far faster.

    Raises:
        SchemaError: not a History.
    """
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SchemaError(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("series"), dict):
        raise SchemaError("bad History: series: expected an object")
    head = decode_data(History, {**data, "series": {}})
    series: dict[str, HistorySeries] = {}
    for name, s in data["series"].items():
        columns: list[list[Any]] = [c for key in ("at", "min", "mean", "max")
                                    if isinstance(s, dict) and isinstance(c := s.get(key), list)]
        try:
            if len(columns) != 4 or len({len(c) for c in columns}) != 1:
                raise TypeError("not four lists of one length")
            # fsum runs in C and raises TypeError on anything but numbers (None, text, lists).
            for c in columns:
                math.fsum(c)
        except TypeError:
            raise SchemaError(f"bad History: series.{name}: expected at, min, mean, max: lists of numbers "
                              "of one length") from None
        at, lo, mean, hi = (tuple(map(float, c)) for c in columns)
        series[name] = HistorySeries(at=at, min=lo, mean=mean, max=hi)
    return replace(head, series=series)


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
                      progress: Progress | None = None, ca_file: str | None = None) -> list[NodePart]:
    """Pull every agent concurrently; parts come back in the order of ``urls``.

    ``ca_file`` holds the CA certificate(s) that ``https://`` agents are verified with.
    """
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca_file) if ca_file else True
    async with httpx.AsyncClient(headers=headers, timeout=HTTP_TIMEOUT_S, verify=verify) as client:
        return list(await asyncio.gather(*(pull_agent(client, u, since_s, progress) for u in urls)))


def read_journal(path: str | Path, since_s: float, progress: Progress | None = None) -> NodePart:
    """A node's part from its journal alone (no agent running, e.g. after a crash).

    The window ends at the journal's last frame, not now: after a crash the last seconds
    before it are what matters. Info and configuration are those the last run recorded
    at its start; there are no live captures. A damaged journal (cut short, bad pages) gives
    what can still be read of it (`salvage`), and ``error`` says what could not be.
    """
    part = NodePart(node=str(path), source=f"journal:{Path(path).resolve()}")
    ticked = 0

    def tick(what: str) -> None:
        nonlocal ticked
        ticked += 1
        if progress is not None:
            progress.step(part.node, what)

    try:
        with JournalReader(path) as reader:
            _read_part(part, reader, since_s, tick, journal_path(path))
            if reader.unreadable:
                part.error = (f"the journal is damaged: {len(reader.unreadable)} stored parts of the window left out: "
                              + "; ".join(reader.unreadable[:5]))
        return part
    except (JournalError, SchemaError, ValueError, OSError, sqlite3.DatabaseError, zlib.error) as exc:
        first = f"{type(exc).__name__}: {exc}"
    try:
        # Nothing to salvage where there is no file, or none this user may read (the error says which).
        check_journal_file(journal_path(path))
    except JournalError:
        return _failed(part, first, tick, ticked)
    done = ticked
    part = NodePart(node=part.node, source=part.source)

    def tick_again(what: str) -> None:
        # The steps the first reading announced are not announced twice.
        nonlocal done
        if done:
            done -= 1
        else:
            tick(what)

    try:
        with salvage(path) as saved:
            _read_part(part, saved.reader, since_s, tick_again, journal_path(path))
            unread = "; ".join(saved.problems + saved.reader.unreadable[:5]) or "nothing more"
            part.error = (f"the journal is damaged ({first}); this bundle holds what could still be read of it "
                          f"({saved.frames} frames, {saved.events} events); could not be read: {unread}")
    except (JournalError, SchemaError, ValueError, OSError, sqlite3.DatabaseError, zlib.error) as exc:
        part = NodePart(node=part.node, source=part.source)
        return _failed(part, f"{first}; and nothing could be salvaged: {exc}", tick, ticked)
    return part


def _read_part(part: NodePart, reader: JournalReader, since_s: float, tick: Callable[[str], None],
               source: Path) -> None:
    """Fill ``part`` from ``reader``: the journal file ``source`` (or its salvaged copy)."""
    runs = reader.runs()
    last_run = runs[-1] if runs else None
    if last_run is not None:
        part.node = last_run.node
        part.info = _decode_info(last_run.info)
        part.config = redact(json.loads(last_run.config)) if last_run.config else None
    tick(f"{len(runs)} runs")
    span = reader.time_range()
    part.to_at = span[1] if span else time.time()
    part.from_at = part.to_at - since_s
    interval_s = part.info.interval_s if part.info else 1.0
    part.capture_errors = ["no live capture: bundle made from the journal alone"]
    # The journal's own directory, not its salvaged copy's.
    directory = source.parent
    kept = sorted(p.name for p in directory.glob("journal.sqlite3.damaged-*")
                  if not p.name.endswith(("-wal", "-shm")) and p.name != source.name)
    if kept:
        # An incident before the agent set its journal aside is in those files, not in this one.
        part.capture_errors.append(f"{directory} also holds journals the agent set aside: {', '.join(kept)}; "
                                   "give them to rigmon snapshot --journal")
    written_as = reader.conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
    if written_as is not None and str(written_as[0]) not in {str(v) for v in range(2, FORMAT_VERSION + 1)}:
        part.capture_errors.append(f"the journal is of format {written_as[0]}, newer than this rigmon reads "
                                   f"({FORMAT_VERSION}): read as far as that format allows; a newer rigmon "
                                   "reads it whole")
    add_saved_alarms(part, source)
    tick("no capture")
    part.history = reader.history(part.node, part.from_at, part.to_at, interval_s)
    tick(f"{len(part.history.series)} series, {len(part.history.events)} events")
    frames = reader.frames_gzip(part.from_at, part.to_at)
    part.frames_gz, part.frame_count = frames.body, frames.count
    if frames.count:
        part.latest = reader.frames(part.to_at, part.to_at, 1)[0]
    tick(f"{frames.count} frames")


def _failed(part: NodePart, error: str, tick: Callable[[str], None], ticked: int) -> NodePart:
    part.error = error
    for _ in range(STEPS_PER_NODE - ticked):
        tick(f"failed: {error}")
    return part


def _decode_info(text: str | None) -> Info | None:
    if not text:
        return None
    try:
        return decode_data(Info, json.loads(text))
    except (SchemaError, ValueError):
        return None
