"""How frames are stored compactly: one gzip stream per block, packed times; format 2's preset dictionaries."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Any

import msgspec

from rigmon.agent.journal.layout import JournalError

#: Format 2's writers made a new compression dictionary (the current frame) after this many seconds of frames.
DICT_ROTATE_S = 600.0
#: Decompressed dictionaries a reader keeps (32 KiB each).
DICT_CACHE_ENTRIES = 16
#: zlib uses at most the last 32 KiB of a preset dictionary.
ZDICT_MAX_BYTES = 32 * 1024
#: Frames at least this old (writer's clock) are recompressed into blocks.
BLOCK_AFTER_S = 60.0
#: Frames per block: 5 minutes at 1 Hz, about 8 MB of JSON for a large rig.
BLOCK_FRAMES = 300
#: A block of fewer frames is written anyway once its first frame is this much older than
#: `BLOCK_AFTER_S` (slow frame intervals), or when a later run has begun.
BLOCK_FLUSH_S = 3600.0
#: Blocks one maintenance pass writes (each is its own short transaction).
MAX_BLOCKS_PER_PASS = 24
#: Deflate level of format 2's blocks (recompressed from per-frame rows; still made from
#: such rows left in a journal written by an older agent).
BLOCK_LEVEL = 9
#: Deflate level of the block stream each frame is written into (format 3): compressed once,
#: when it is written. 6 costs ~0.11 ms for a large rig's 27 kB frame and stores ~890 bytes;
#: 5 ~0.10 ms for ~1040 bytes, 9 ~0.17 ms for ~790 bytes (`benchmarks/results-journalfmt.md`).
STREAM_LEVEL = 6
#: What zlib writes to finish a deflate stream that ends at a sync flush: an empty final block
#: with fixed codes (3 bits and a 7-bit end-of-block code, zero padded to two bytes).
FINAL_EMPTY_BLOCK = b"\x03\x00"
#: Deflate level of gzip members made on the fly (parts of blocks, recent frames) for an export:
#: speed first, they are a few hundred frames at most.
EXPORT_LEVEL = 1

#: Stored blocks found to decompress whole, by CRC-32 and length of their bytes and frame count.
_SOUND_BLOCKS: set[tuple[int, int, int]] = set()
#: Entries kept at most (two days of blocks of some hundred nodes); then it starts afresh.
MAX_SOUND_BLOCKS = 65536


def compress(raw: bytes, zdict: bytes | None) -> bytes:
    """A frame as format 2 stored it: zlib-6 against a preset dictionary (kept to make such rows in tests)."""
    comp = zlib.compressobj(6, zdict=zdict) if zdict else zlib.compressobj(6)
    return comp.compress(raw) + comp.flush()


def decompress(body: bytes, zdict: bytes | None) -> bytes:
    dec = zlib.decompressobj(zdict=zdict) if zdict else zlib.decompressobj()
    return dec.decompress(body) + dec.flush()


def gzip_member(raw: bytes, level: int = EXPORT_LEVEL) -> bytes:
    """``raw`` as one gzip member (no name, no time stamp: the same input gives the same bytes)."""
    comp = zlib.compressobj(level, zlib.DEFLATED, 31, 9)
    return comp.compress(raw) + comp.flush()


def stream_compressor() -> Any:
    """A new block stream: a gzip member that each frame's line is added to, then sync-flushed.

    Each commit stores what the compressor gave for its frames (ending at a sync flush, so on a
    byte boundary); the rows of a stream, concatenated, are the start of one gzip member that
    decompresses to every line added so far. The frame that fills a block finishes the member.
    """
    # memLevel 8 (zlib's default): the same bytes within 0.3 % as 9, ~10 % less CPU, half the hash tables.
    return zlib.compressobj(STREAM_LEVEL, zlib.DEFLATED, 31, 8)


def gunzip_prefix(body: bytes) -> tuple[bytes, bool]:
    """The lines of a (possibly unfinished) gzip member, and whether it was finished.

    Raises:
        zlib.error: the data is not a gzip member.
    """
    dec = zlib.decompressobj(31)
    out = dec.decompress(body)
    return out, dec.eof


def seal_stream(body: bytes) -> bytes:
    """A stream's rows (``body``) as one finished gzip member.

    A stream whose writer finished it is returned as it is. One left open (the writer was
    killed, a write failed, a run ended before its block was full) ends at a sync flush: an
    empty final block and the gzip trailer (CRC-32 and length of the lines) finish it, what
    ``flush()`` would have written, without compressing anything again.

    Raises:
        JournalError: the rows do not decompress (damage).
    """
    try:
        raw, finished = gunzip_prefix(body)
    except zlib.error as exc:
        raise JournalError(f"a frame stream does not decompress: {exc}") from None
    if finished:
        return body
    return body + FINAL_EMPTY_BLOCK + struct.pack("<II", zlib.crc32(raw), len(raw) & 0xFFFFFFFF)


def gunzip_member(body: bytes) -> bytes:
    dec = zlib.decompressobj(31)
    out = dec.decompress(body)
    if not dec.eof:
        raise JournalError("a frame block is truncated")
    return out


def pack_times(times: Sequence[float]) -> bytes:
    return zlib.compress(struct.pack(f"<{len(times)}d", *times), 6)


def unpack_times(blob: bytes) -> tuple[float, ...]:
    raw = zlib.decompress(blob)
    return struct.unpack(f"<{len(raw) // 8}d", raw)


class FramesGzip(msgspec.Struct, frozen=True, gc=False):
    """Frames of a window as concatenated gzip members of JSON lines (see `JournalReader.frames_gzip`).

    Attributes:
        body: gzip data; decompressed, one wire frame per line, oldest first.
        count: frames in it.
        last_at: ``taken_at`` of its last frame, ``None`` when empty.
        more: the limit cut the window short: ask again after ``last_at``.
    """

    body: bytes
    count: int
    last_at: float | None
    more: bool


def inflates_whole(body: bytes, frames: int) -> bool:
    """Whether a stored block decompresses whole (its CRC checked) to ``frames`` lines.

    Once per process and block: a block found sound is known by the CRC-32 of its stored
    bytes (some fifty times cheaper than decompressing it), so exports of the same hour (a
    snapshot, a dashboard's backfill) cost what they cost before, and bytes that change
    afterwards are checked again.
    """
    key = (zlib.crc32(body), len(body), frames)
    if key in _SOUND_BLOCKS:
        return True
    dec = zlib.decompressobj(31)
    lines = 0
    rest = body
    try:
        while rest and not dec.eof:
            # In pieces, so the output stays in the cache and is never all in memory.
            lines += dec.decompress(rest, 1 << 20).count(b"\n")
            rest = dec.unconsumed_tail
        while not dec.eof:
            piece = dec.decompress(b"", 1 << 20)
            if not piece:
                break
            lines += piece.count(b"\n")
    except zlib.error:
        return False
    if not (dec.eof and lines == frames):
        return False
    if len(_SOUND_BLOCKS) >= MAX_SOUND_BLOCKS:
        _SOUND_BLOCKS.clear()
    _SOUND_BLOCKS.add(key)
    return True
