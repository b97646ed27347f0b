"""Redaction of GPU processes' command lines in the frames and events a snapshot passes on.

Agents redact a process's command line when they read it (`rigmon.redact_cmdline`); frames and events
recorded by older agents, still in a journal or an agent's answer, hold them whole. The bundle's
``frames.jsonl.gz``, ``latest.json`` and ``events.jsonl`` go through `redact_frames_gz` and
`redact_json_line` on their way into it, and the events REPORT.md lists through `redact_events`: every ``"cmdline"`` and ``"command"`` string is redacted, and
where one changed, the same text elsewhere on its line (an event's message: ``python3 ... (pid 4242)
started``) too. A gzip member with nothing to redact (any newer agent's) is kept byte for byte: it is
decompressed to be read, never compressed again.
"""

from __future__ import annotations

import json
import zlib

from rigmon.agent.journal import gzip_member
from rigmon.lazy_re import lazy_compile
from rigmon.redact_cmdline import redact_command_text
from rigmon.schema import Event, decode, encode
from rigmon.snapshot.unpack_limits import unpack_budget

#: Compressed bytes fed to the decompressor at a time (so a member's end is found without copying the rest).
CHUNK_BYTES = 1 << 20

#: The keys of command lines as the wire encoder writes them (no spaces), up to their string's content.
COMMAND_KEYS = (b'"cmdline":"', b'"command":"')
# A JSON string's content, to its closing quote (escapes unrolled: a scan of hundreds of MB of frames).
_STRING_CONTENT = lazy_compile(rb'[^"\\]*(?:\\.[^"\\]*)*')


def redact_json_line(data: bytes, seen: dict[bytes, bytes | None] | None = None) -> bytes:
    """``data`` (wire JSON: one or more lines) with its command lines redacted (see the module); the very
    same bytes when none holds a secret. ``seen`` remembers each JSON string's redaction (``None``: none)
    between calls: a job's command line is in every frame of its run."""
    seen = {} if seen is None else seen
    changed: dict[bytes, bytes] = {}
    for inner in _command_strings(data):
        if inner not in seen:
            seen[inner] = _redacted_inner(inner)
        redacted = seen[inner]
        if redacted is not None:
            changed[inner] = redacted
    # Longest first: a short command is the head of its full command line.
    for old in sorted(changed, key=len, reverse=True):
        data = data.replace(old, changed[old])
    return data


def _command_strings(data: bytes) -> set[bytes]:
    """The contents of the ``"cmdline"`` and ``"command"`` strings of ``data``, each once."""
    found: set[bytes] = set()
    for key in COMMAND_KEYS:
        # Split at the key (a scan in C), then each piece's string read from its start: the frames' commands
        # are a few strings repeated in every frame.
        for piece in data.split(key)[1:]:
            end = piece.find(b'"')
            content = piece[:end] if end >= 0 else piece
            if b"\\" in content:  # an escaped quote may end it early: read the string as JSON does
                m = _STRING_CONTENT.match(piece)
                content = m.group(0) if m is not None else content
            found.add(content)
    return found


def _redacted_inner(inner: bytes) -> bytes | None:
    """A JSON string's content redacted as a command line, ``None`` when it holds nothing to redact."""
    try:
        text = json.loads(b'"' + inner + b'"')
    except ValueError:
        return None
    redacted = redact_command_text(text)
    return None if redacted == text else json.dumps(redacted, ensure_ascii=False)[1:-1].encode()


def redact_frames_gz(body: bytes) -> bytes:
    """Gzip members of wire JSON lines (`NodePart.frames_gz`) with their command lines redacted: a member
    that changes is compressed again, the others are kept as they are. A part that does not decompress,
    or would unpack past what rigmon writes (`unpack_budget`), is kept as it is from there on: the
    bundle's reader says it is damaged, and nothing of it is shown."""
    view = memoryview(body)
    budget = unpack_budget(len(body))
    seen: dict[bytes, bytes | None] = {}
    out: list[bytes] = []
    off = 0
    while off < len(body):
        start = off
        stream = zlib.decompressobj(wbits=31)
        pieces: list[bytes] = []
        try:
            while not stream.eof and off < len(body):
                chunk = view[off:off + CHUNK_BYTES]
                pieces.append(stream.decompress(chunk, budget + 1))
                budget -= len(pieces[-1])
                if budget < 0 or stream.unconsumed_tail:
                    raise zlib.error("unpacks past what rigmon writes")
                off += len(chunk)
        except zlib.error:
            out.append(body[start:])
            break
        if not stream.eof:
            out.append(body[start:])
            break
        off -= len(stream.unused_data)
        lines = b"".join(pieces)
        redacted = redact_json_line(lines, seen)
        out.append(body[start:off] if redacted is lines else gzip_member(redacted))
    return b"".join(out)



def redact_events(events: tuple[Event, ...]) -> tuple[Event, ...]:
    """``events`` with the command lines of GPU process events (those whose data names a ``command``)
    redacted in their data and message; the very same tuple when none changes."""
    out: list[Event] = []
    changed = False
    for event in events:
        if "command" in event.data:
            raw = encode(event)
            redacted = redact_json_line(raw)
            if redacted is not raw:
                event = decode(Event, redacted)
                changed = True
        out.append(event)
    return tuple(out) if changed else events
