"""How much a bundle may grow once unpacked: a hostile bundle (a decompression bomb) is refused
before it takes the dashboard's memory.

rigmon's own bundles grow little: the tar holds the frames already gzipped (stored as they are) and
small JSON files, and the frames' wire JSON compresses 5-30x. A gzip stream that unpacks to more
than `UNPACK_RATIO` times its size (plus `UNPACK_SLACK_BYTES`) is not one rigmon wrote.
"""

from __future__ import annotations

import zlib

#: Bytes unpacked per packed byte beyond which a bundle or its frames are refused.
UNPACK_RATIO = 200
#: Bytes any stream may unpack to, whatever its size (a short window of small frames).
UNPACK_SLACK_BYTES = 64 * 1024 * 1024


class TooLarge(ValueError):
    """Unpacking would go past the budget; the message says how far."""


def unpack_budget(packed_bytes: int) -> int:
    """The most ``packed_bytes`` of gzip may unpack to."""
    return UNPACK_RATIO * packed_bytes + UNPACK_SLACK_BYTES


def gunzip_bounded(packed: bytes) -> bytes:
    """Every gzip member of ``packed``, one after another, within `unpack_budget` of its size.

    Raises:
        TooLarge: it would unpack to more.
        zlib.error, EOFError: not gzip, or cut short.
    """
    limit = unpack_budget(len(packed))
    out: list[bytes] = []
    total = 0
    rest = packed
    while rest:
        stream = zlib.decompressobj(wbits=31)
        chunk = stream.decompress(rest, limit - total + 1)
        total += len(chunk)
        if total > limit or stream.unconsumed_tail:
            raise TooLarge(f"unpacks to more than {limit} bytes ({UNPACK_RATIO}x its {len(packed)} plus "
                           f"{UNPACK_SLACK_BYTES // (1024 * 1024)} MB): not something rigmon writes")
        if not stream.eof:
            raise EOFError("compressed file ended before the end-of-stream marker was reached")
        out.append(chunk)
        rest = stream.unused_data
    return b"".join(out)
