"""Names the kernel gives in bytes (directory entries, /proc/net/dev) as text that keeps them apart."""

from __future__ import annotations

#: What starts an escaped byte in a name shown as text.
_ESCAPE = "\\x"


def text_name(name: str) -> str:
    """``name`` as plain text (valid UTF-8) that stays distinct for distinct raw names.

    The kernel names network interfaces, md arrays and sysfs entries in any bytes; Python reads
    bytes that are not UTF-8 back as lone surrogates (``surrogateescape``), which no UTF-8 can
    carry. U+FFFD for them would make ``eth\\xf6`` and ``eth\\xfc`` one name: one series and
    records that overwrite each other. Instead each bad byte is written ``\\xNN``, as Python's
    ``backslashreplace`` does (``eth\\xf6``, the text of six characters).

    A name that is valid UTF-8 and holds no ``\\x`` is returned as it is (every name on a sane
    machine, so the cost is one encode). Any other name is escaped in full: its backslashes
    doubled as well, so a name spelled ``eth\\xf6`` in plain text shows as ``eth\\\\xf6`` and never
    meets the name with the byte 0xF6. Escaped names always hold ``\\x`` and the others never
    do, so no two raw names give the same text.

    Args:
        name: a name as read with ``surrogateescape`` (`os.listdir` of a str path, or
            ``HostRoot.read_text(..., errors="surrogateescape")``).

    Returns:
        The name as text, for records, series and labels; never for building a path.
    """
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        if _ESCAPE not in name:
            return name
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = name.encode("utf-8", "surrogatepass")  # a surrogate no byte gave: its three bytes escaped
    return raw.replace(b"\\", b"\\\\").decode("utf-8", "backslashreplace")


class TextNames:
    """`text_name` of each name a collector meets, worked out once per name, not on every read.

    For names read afresh on every tick (the lines of /proc/diskstats, md members): a lookup
    of a name seen before costs one dict probe. The memo forgets every name once it holds
    ``limit`` of them (a garbled listing of new names every tick does not grow it for ever).

    Args:
        limit: names held before all are forgotten.
    """

    __slots__ = ("_limit", "_texts")

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._texts: dict[str, str] = {}

    def __call__(self, name: str) -> str:
        """``text_name(name)``, from the memo when ``name`` was seen before."""
        text = self._texts.get(name)
        if text is None:
            if len(self._texts) >= self._limit:
                self._texts.clear()
            text = self._texts[name] = text_name(name)
        return text
