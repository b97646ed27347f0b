"""The answers of /v1/history: a window of the journal as JSON, or its frames as JSON lines
(plain or gzip), read in a thread by the API (`rigmon.agent.api`)."""

from __future__ import annotations

import gzip
from pathlib import Path

import msgspec
from msgspec.structs import replace

from rigmon.agent.journal import JournalReader, encode_history, gzip_member
from rigmon.schema import SCHEMA_VERSION, History

#: Longest window /v1/history?frames=1 returns whole frames for, and most frames in one answer.
MAX_HISTORY_FRAMES_SPAN_S = 3600.0
MAX_HISTORY_FRAMES = 7200
#: Window of /v1/history when ``from`` is not given.
DEFAULT_HISTORY_SPAN_S = 3600.0
#: Response headers of a JSON-lines /v1/history answer: how many frames it holds, and the
#: ``taken_at`` of the last (where to continue when ``more``), without reading the frames.
FRAMES_HEADER = "rigmon-frames"
LAST_FRAME_HEADER = "rigmon-last-frame-at"
#: Response header of any /v1/history answer read from a journal with damage in the window: how
#: many stored parts (blocks, frame streams, single frames) were left out because their bytes do not
#: decompress (counted up to 100, the most the journal reader notes). Absent when none was.
UNREADABLE_HEADER = "rigmon-unreadable-parts"
#: The hand-written OpenAPI description of this API, served at /v1/openapi.json (kept true
#: to the routes by tests/agent/test_openapi.py).


# A frozen msgspec Struct, not a dataclass (cheaper to define at the agent's start); gc=False:
# frozen, holding only plain values and frozen records, it cannot be part of a reference cycle.
class FrameLines(msgspec.Struct, frozen=True, gc=False):
    """A JSON-lines /v1/history answer: the body and its headers."""

    body: bytes
    headers: dict[str, str]
    media_type: str = "application/x-ndjson"


def history_lines(path: Path, node: str, from_at: float, to_at: float, interval_s: float,
                  names: set[str] | None, gzipped: bool) -> FrameLines:
    """A /v1/history?frames=1 answer as JSON lines: the `History` without frames, then one frame per line.

    With ``gzipped`` (a client accepting ``application/gzip``) the body is those lines as a
    gzip file of several members: the journal's stored blocks go out as they are, so the
    agent compresses only the last minutes and the edges of the window, and the client can
    keep the frames compressed as received. (Not ``Content-Encoding: gzip``: common HTTP
    clients decode only the first member of such a body and would silently lose frames.)

    Raises:
        JournalError: the journal cannot be read.
    """
    with JournalReader(path) as reader:
        # The frames carry every value: series only when asked for by name.
        history = reader.history(node, from_at, to_at, interval_s, set() if names is None else names)
        frames = reader.frames_gzip(from_at, to_at, MAX_HISTORY_FRAMES)
        unreadable = len(reader.unreadable)
    head = encode_history(replace(history, more=frames.more)) + b"\n"
    headers = {FRAMES_HEADER: str(frames.count), "vary": "Accept"}
    if unreadable:
        headers[UNREADABLE_HEADER] = str(unreadable)
    if frames.last_at is not None:
        headers[LAST_FRAME_HEADER] = repr(frames.last_at)
    if gzipped:
        return FrameLines(gzip_member(head) + frames.body, headers, "application/gzip")
    return FrameLines(head + gzip.decompress(frames.body), headers)


def history_body(path: Path, node: str, from_at: float, to_at: float, interval_s: float,
                 names: set[str] | None, with_frames: bool) -> tuple[bytes, int]:
    """The JSON of a /v1/history answer, read from the journal (blocking: run in a thread), and how
    many stored parts of the window were left out because they do not decompress (`UNREADABLE_HEADER`).

    Raises:
        JournalError: the journal cannot be read.
    """
    with JournalReader(path) as reader:
        if with_frames and names is None:
            # The frames carry every value: series only when asked for by name.
            history = reader.history(node, from_at, to_at, interval_s, set())
        else:
            history = reader.history(node, from_at, to_at, interval_s, names)
        if not with_frames:
            return encode_history(history), len(reader.unreadable)
        raw = reader.frames_json(from_at, to_at, MAX_HISTORY_FRAMES + 1)
        unreadable = len(reader.unreadable)
    more = len(raw) > MAX_HISTORY_FRAMES
    # Frames are stored as their wire JSON: splice them in rather than decode and re-encode
    # thousands of them (the export of a bug-report bundle waits on this).
    head = encode_history(replace(history, more=more))
    assert head.endswith(b'"frames":[]}')
    return head[: -len(b"[]}")] + b"[" + b",".join(raw[:MAX_HISTORY_FRAMES]) + b"]}", unreadable


def empty_history_answer(node: str, from_at: float, to_at: float, interval_s: float,
                         as_lines: bool, gzipped: bool) -> FrameLines:
    """The /v1/history answer of a journal that holds nothing yet: no series, events or frames.

    Same shapes as `history_body` and `history_lines` (``as_lines``/``gzipped``), so a client
    reads it like any other window.
    """
    history = History(schema=SCHEMA_VERSION, node=node, from_at=from_at, to_at=to_at, tier="frames",
                      step_s=interval_s, series={})
    head = encode_history(history)
    if gzipped:
        return FrameLines(gzip_member(head + b"\n"), {FRAMES_HEADER: "0", "vary": "Accept"}, "application/gzip")
    if as_lines:
        return FrameLines(head + b"\n", {FRAMES_HEADER: "0", "vary": "Accept"})
    return FrameLines(head, {}, "application/json")
