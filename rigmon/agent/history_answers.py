"""The answers of /v1/history: a window of the journal as JSON, or with its frames (JSON, JSON lines
plain or gzip) spooled and sent as the client reads, read in a thread by the API (`rigmon.agent.api`)."""

from __future__ import annotations

import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Literal

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
    """A small /v1/history answer built whole: the body and its headers."""

    body: bytes
    headers: dict[str, str]
    media_type: str = "application/x-ndjson"


#: Shapes of a /v1/history?frames=1 answer: gzip members of JSON lines, JSON lines, one JSON object.
FramesShape = Literal["gzip", "lines", "json"]
#: Bytes of an answer's frames kept in memory; beyond, they go to a file beside the journal (a
#: dashboard's fill of a few minutes never touches the disk, an hour of a large rig never the memory).
SPOOL_IN_MEMORY_BYTES = 1 << 20
#: Bytes read from the spool (or inflated from it) per piece sent: the size of `rigmon.agent.api`'s pieces.
PIECE_BYTES = 256 * 1024


class FramesAnswer:
    """A /v1/history?frames=1 answer: its headers, and its body sent piece by piece as the client reads.

    The frames wait in ``spool`` as gzip members (as the journal stores them, some 10x smaller than
    their JSON); `pieces` reads them out and, for the ``lines`` and ``json`` shapes, inflates them
    piece by piece. An hour of an 8-GPU node is ~200 MB of JSON: built whole, a few clients that did
    not read held that much each in an agent capped at 512 MB. Close it when done (`pieces` does).

    Args:
        head: the `History` without frames (``"frames":[]`` last), as JSON.
        spool: the frames as gzip members of JSON lines, read from its start.
        shape: what the body is (`FramesShape`).
        headers: the answer's headers.
    """

    def __init__(self, head: bytes, spool: IO[bytes], shape: FramesShape, headers: dict[str, str]) -> None:
        self.head = head
        self.spool = spool
        self.shape = shape
        self.headers = headers
        self.media_type = {"gzip": "application/gzip", "lines": "application/x-ndjson",
                           "json": "application/json"}[shape]

    def pieces(self) -> Iterator[bytes]:
        """The body in pieces of about `PIECE_BYTES` (the same bytes as the answer built whole); closes the spool."""
        try:
            if self.shape == "gzip":
                yield gzip_member(self.head + b"\n")
                while piece := self.spool.read(PIECE_BYTES):
                    yield piece
            elif self.shape == "lines":
                yield self.head + b"\n"
                yield from _inflated(self.spool)
            else:
                assert self.head.endswith(b'"frames":[]}')
                yield self.head[: -len(b"[]}")] + b"["
                # One frame per line: the newlines between them become the array's commas.
                held = b""
                for piece in _inflated(self.spool):
                    data = held + piece
                    held = data[-1:]
                    if len(data) > 1:
                        yield data[:-1].replace(b"\n", b",")
                yield (b"" if held in (b"", b"\n") else held) + b"]}"
        finally:
            self.close()

    def read_all(self) -> bytes:
        """The whole body (tests, small answers)."""
        return b"".join(self.pieces())

    def close(self) -> None:
        """Drop the spool (its file, if it went to one)."""
        self.spool.close()


def _inflated(spool: IO[bytes]) -> Iterator[bytes]:
    """The JSON lines of ``spool``'s gzip members, in pieces of at most `PIECE_BYTES`."""
    dec = zlib.decompressobj(31)
    data = b""
    while True:
        if not data:
            data = spool.read(PIECE_BYTES)
            if not data:
                rest = dec.flush()
                if rest:
                    yield rest
                return
        piece = dec.decompress(data, PIECE_BYTES)
        if dec.eof:  # the next member starts in what is left
            data = dec.unused_data
            dec = zlib.decompressobj(31)
        else:
            data = dec.unconsumed_tail
        if piece:
            yield piece


def frames_answer(path: Path, node: str, from_at: float, to_at: float, interval_s: float,
                  names: set[str] | None, shape: FramesShape) -> FramesAnswer:
    """A /v1/history?frames=1 answer, its frames spooled (blocking: run in a thread, then send `FramesAnswer.pieces`).

    ``lines`` and ``gzip`` (a client accepting ``application/x-ndjson`` or ``application/gzip``):
    the `History` without frames, then one frame per line. As ``gzip`` those lines are a gzip file
    of several members: the journal's stored blocks go out as they are, so the agent compresses
    only the last minutes and the edges of the window, and the client can keep the frames
    compressed as received. (Not ``Content-Encoding: gzip``: common HTTP clients decode only the
    first member of such a body and would silently lose frames.) ``json``: the `History` with
    its frames.

    Raises:
        JournalError: the journal cannot be read.
    """
    spool: IO[bytes] | None = None
    try:
        with JournalReader(path) as reader:
            # The frames carry every value: series only when asked for by name.
            history = reader.history(node, from_at, to_at, interval_s, set() if names is None else names)
            spool = tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY_BYTES, "w+b", prefix="rigmon-history-",
                                                  dir=_spool_dir(reader.path.parent))
            frames = reader.frames_gzip(from_at, to_at, MAX_HISTORY_FRAMES, out=spool)
            unreadable = len(reader.unreadable)
        spool.seek(0)
    except BaseException:
        if spool is not None:
            spool.close()
        raise
    head = encode_history(replace(history, more=frames.more))
    if shape == "json":
        return FramesAnswer(head, spool, shape, {UNREADABLE_HEADER: str(unreadable)} if unreadable else {})
    headers = {FRAMES_HEADER: str(frames.count), "vary": "Accept"}
    if unreadable:
        headers[UNREADABLE_HEADER] = str(unreadable)
    if frames.last_at is not None:
        headers[LAST_FRAME_HEADER] = repr(frames.last_at)
    return FramesAnswer(head, spool, shape, headers)


def _spool_dir(directory: Path) -> str | None:
    """Where a spool goes beyond memory: beside the journal (a disk the agent writes anyway, where
    ``/tmp`` may be memory), else (``None``) the system's temporary directory: a state directory on a
    read-only file system still has its journal answered from."""
    try:
        tempfile.TemporaryFile(dir=directory).close()
    except OSError:
        return None
    return str(directory)


def history_body(path: Path, node: str, from_at: float, to_at: float, interval_s: float,
                 names: set[str] | None) -> tuple[bytes, int]:
    """The JSON of a /v1/history answer without frames, read from the journal (blocking: run in a thread),
    and how many stored parts of the window were left out because they do not decompress (`UNREADABLE_HEADER`).

    Raises:
        JournalError: the journal cannot be read.
    """
    with JournalReader(path) as reader:
        return encode_history(reader.history(node, from_at, to_at, interval_s, names)), len(reader.unreadable)


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
