"""frame_json: each frame's wire JSON (and its summary record's) encoded once for all its readers (/v1/latest, SSE, the journal)."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import msgspec

from rigmon.schema import Frame, decode, encode

log = logging.getLogger(__name__)

#: Frames whose encoding is kept: the newest of every agent in the process (the simulator runs
#: several), and those SSE readers catching up are sending.
KEEP_FRAMES = 32


class EncodedFrames:
    """A small cache of `schema.encode` for frames, keyed by the frame object itself.

    A frame is immutable, so its encoding never goes stale; the cache holds the frame as
    well as its bytes, so an entry cannot be mistaken for another frame that later gets
    the same ``id``. Thread-safe: the journal encodes from its own thread.

    Args:
        keep: entries kept, least recently used dropped first.
        encoder: what a frame's bytes are (default: its wire JSON).
    """

    def __init__(self, keep: int = KEEP_FRAMES, encoder: Callable[[Frame], bytes] = encode) -> None:
        self.keep = keep
        self._encode = encoder
        self._lock = threading.Lock()
        self._items: OrderedDict[int, tuple[Frame, bytes]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, frame: Frame) -> bytes:
        """The bytes of ``frame`` (its wire JSON, exactly as `schema.encode` gives it, by default)."""
        key = id(frame)
        with self._lock:
            item = self._items.get(key)
            if item is not None and item[0] is frame:
                self._items.move_to_end(key)
                self.hits += 1
                return item[1]
        raw = self._encode(frame)
        with self._lock:
            self.misses += 1
            self._items[key] = (frame, raw)
            self._items.move_to_end(key)
            while len(self._items) > self.keep:
                self._items.popitem(last=False)
        return raw


#: The process's cache: every reader of a frame shares it, whichever agent published it.
ENCODED = EncodedFrames()


def frame_json(frame: Frame) -> bytes:
    """The wire JSON of ``frame``, encoded at most once while it is among the newest."""
    return ENCODED.get(frame)


def _encode_summary(frame: Frame) -> bytes:
    # Imported on the first summary asked for: an agent no dashboard follows by summaries never
    # loads the cluster screen's figures (a few ms of its start).
    from rigmon.summary import summary_record

    return encode(summary_record(frame))


#: The summary records of the newest frames (``/v1/stream?view=summary``), shared like `ENCODED`.
SUMMARIES = EncodedFrames(encoder=_encode_summary)


def summary_json(frame: Frame) -> bytes:
    """The JSON of ``frame``'s `rigmon.summary.SummaryRecord`, built at most once while it is among the newest."""
    return SUMMARIES.get(frame)


#: Per node, how the last frame mended by `valid_text` failed to encode (said once in the log).
_MENDED: dict[str, str] = {}


def valid_text(frame: Frame) -> Frame:
    """``frame`` itself when it encodes, else a copy whose text is valid UTF-8.

    A lone surrogate cannot be encoded: a name the kernel gave in bytes that are not UTF-8
    (Python reads a directory entry's bytes back as surrogates) would make every reader of
    the frame fail: ``/v1/latest``, streams, the journal. Such text gets U+FFFD where its bad
    bytes were, once, before any listener sees the frame.

    Raises:
        ValueError: the frame does not encode for another reason (a NaN);
        OverflowError: it holds an integer past 64 bits. The sampler leaves out what caused it
            (`rigmon.agent.sampler.Sampler`).
    """
    try:
        frame_json(frame)
    except UnicodeEncodeError as exc:
        # Once while the same text stays bad: such a name is there in every frame (every second).
        if _MENDED.get(frame.node) != str(exc):
            _MENDED[frame.node] = str(exc)
            log.warning("frame %d holds text that is not UTF-8 (%s): bad bytes replaced by U+FFFD (not logged "
                        "again while the frames hold the same)", frame.seq, exc)
        return decode(Frame, encode(_replace_surrogates(msgspec.to_builtins(frame))))
    _MENDED.pop(frame.node, None)
    return frame


def _replace_surrogates(data: Any) -> Any:
    if isinstance(data, str):
        return _text(data)
    if isinstance(data, dict):
        return {_text(k) if isinstance(k, str) else k: _replace_surrogates(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_replace_surrogates(v) for v in data]
    return data


def _text(value: str) -> str:
    """``value`` as valid UTF-8: undecodable bytes (surrogate escapes) and other lone surrogates as U+FFFD."""
    try:
        raw = value.encode("utf-8", "surrogateescape")  # the bytes a file name had: one U+FFFD each
    except UnicodeEncodeError:
        raw = value.encode("utf-8", "surrogatepass")  # "\\ud800" from a client: its three bytes
    return raw.decode("utf-8", "replace")
