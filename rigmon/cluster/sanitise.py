"""Text from agents made safe for a terminal: control characters and bidi overrides made visible, once, at decode.

Every string an agent sends (node and device names, event subjects and messages, an
acknowledgement's ``by``, collector errors, the reason of an HTTP error) ends up on an
operator's terminal. A raw ``ESC]0;...BEL`` there retitles the window, OSC 52 writes the
clipboard, ``ESC[2J`` blanks the screen, a C1 ``CSI`` (U+009B) does the same on terminals
that honour 8-bit controls, and bidi overrides reorder what the operator reads. So every
string decoded from an agent (frames, gaps, info, alarms, history, replay bundles) passes
through `clean_text`: C0 controls, DEL, C1 controls, the bidi embeddings, overrides and
isolates (U+202A-U+202E, U+2066-U+2069) and the line and paragraph separators
(U+2028/U+2029) become visible escapes (``\\x1b``, ``\\u202e``); tab, line feed and carriage
return become a space. Nothing else changes, and cleaning twice changes nothing more.

The decode path is hot (a dashboard decodes 64 nodes' frames of tens of kB every second),
so `decode_agent` looks at the raw JSON bytes first: an answer with no byte that could
start such a character (nearly all of them) is decoded exactly as before, and only the
others have their strings walked. No UI here: the dashboard draws what comes out as text.
"""

from __future__ import annotations

import dataclasses
import json
import re
from functools import cache
from typing import Any, Literal, TypeVar, get_args, get_origin

import msgspec

from rigmon.schema import SchemaError, decode, decode_data
from rigmon.schema.tolerant import decode_tolerating_readings
from rigmon.typed import field_types, record_field_names, record_fields

T = TypeVar("T")

#: Characters that never reach the screen as they are.
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028-\u202e\u2066-\u2069]")
#: What tab, line feed and carriage return become (a table cell is one line).
_SPACED = frozenset("\t\n\r")

# Bytes of JSON text that can begin an unsafe character: a raw C0 or DEL, the lead bytes of
# the UTF-8 forms of U+0080-U+009F (C2) and U+2028-U+2069 (E2), and the backslash of an
# escape (``\u001b``, ``\n``). `bytes.translate` finds them at memory speed; what follows
# each of them is looked at only when there is one (`bytes.split`, no per-byte regex).
_SUSPECT_BYTES = bytes(range(0x20)) + b"\x7f\\\xc2\xe2"
_NOT_SUSPECT = bytes(b for b in range(256) if b not in _SUSPECT_BYTES)
_C0_AND_DEL = frozenset([*range(0x20), 0x7F])
_UNSAFE_CODES = (*range(0x20), *range(0x7F, 0xA0), *range(0x2028, 0x202F), *range(0x2066, 0x206A))
#: The four hex digits of a JSON ``\uXXXX`` escape of an unsafe character (compared in lower case).
_UNSAFE_HEX = frozenset(f"{code:04x}".encode() for code in _UNSAFE_CODES)
#: What follows a C2 or E2 lead byte in the UTF-8 form of an unsafe character.
_UNSAFE_C2_TAILS = frozenset(chr(code).encode()[1:] for code in _UNSAFE_CODES if 0x80 <= code < 0x800)
_UNSAFE_E2_TAILS = frozenset(chr(code).encode()[1:] for code in _UNSAFE_CODES if code >= 0x800)
#: JSON's one-letter escapes of control characters (``\"``, ``\\`` and ``\/`` are harmless).
_CONTROL_ESCAPES = frozenset([b"b", b"f", b"n", b"r", b"t"])


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SPACED:
        return " "
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean_text(text: str) -> str:
    """``text`` with every unsafe character made visible (``ESC`` -> ``\\x1b``, U+202E ->
    ``\\u202e``; tab, LF and CR -> a space); ``text`` itself when it has none."""
    if UNSAFE.search(text) is None:
        return text
    return UNSAFE.sub(_visible, text)


def clean_lines(text: str) -> str:
    """Multi-line ``text`` (a report, a check's output) with each line passed through
    `clean_text`: line feeds stay, every other unsafe character is made visible."""
    return "\n".join(clean_text(line) for line in text.split("\n"))


def clean_data(data: Any) -> Any:
    """Parsed JSON with every string, keys included, passed through `clean_text`."""
    if isinstance(data, str):
        return clean_text(data)
    if isinstance(data, list):
        return [clean_data(v) for v in data]
    if isinstance(data, dict):
        return {clean_text(k): clean_data(v) for k, v in data.items()}
    return data


def may_hold_unsafe(raw: bytes | str) -> bool:
    """Whether the JSON text ``raw`` may decode to a string with an unsafe character.

    False only when it cannot (no false negatives); true also for harmless text such as
    ``\\\\u001b`` (an escaped backslash before ``u001b``) or pretty-printed JSON.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    found = data.translate(None, _NOT_SUSPECT)
    if not found:
        return False
    seen = set(found)
    if not seen.isdisjoint(_C0_AND_DEL):
        return True
    if 0x5C in seen and any(part[:1] in _CONTROL_ESCAPES or (part[:1] == b"u" and part[1:5].lower() in _UNSAFE_HEX)
                            for part in data.split(b"\\")[1:] if part):
        return True
    if 0xC2 in seen and any(part[:1] in _UNSAFE_C2_TAILS for part in data.split(b"\xc2")[1:]):
        return True
    return 0xE2 in seen and any(part[:2] in _UNSAFE_E2_TAILS for part in data.split(b"\xe2")[1:])


def decode_agent(cls: type[T], raw: bytes | str) -> T:
    """Decode JSON from an agent into ``cls`` (as `rigmon.schema.decode`) with every string
    cleaned by `clean_text`.

    A newer agent's readings may hold an enum-like value this dashboard does not know (an md
    health, a link state added since): refused by the strict decode, the answer is decoded again
    with those values kept as text (`rigmon.schema.tolerant`), rather than the whole frame lost.

    Raises:
        SchemaError: the text is not JSON, does not fit ``cls``, or (for frames and info)
            carries another schema version.
    """
    try:
        return _decode_agent(cls, raw)
    except SchemaError as refused:
        return _tolerating_readings(cls, raw, refused)


def _tolerating_readings(cls: type[T], raw: bytes | str, refused: SchemaError) -> T:
    """``raw`` decoded with its readings' unknown enum-like values kept as text (cleaned); raises
    ``refused`` when it has none (or is not JSON)."""
    try:
        data = clean_data(json.loads(raw))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise refused from None
    record = decode_tolerating_readings(cls, data)
    if record is None:
        raise refused
    return record


def _decode_agent(cls: type[T], raw: bytes | str) -> T:
    """`decode_agent`'s strict decode."""
    if not may_hold_unsafe(raw):
        # Nearly every answer: straight from the bytes to the record (msgspec, compiled).
        return decode(cls, raw)
    # Some string may need cleaning: decode, then clean the record's text fields (`clean_record`).
    try:
        record = decode(cls, raw)
    except SchemaError:
        pass
    else:
        return clean_record(record)
    # Refused: cleaned before validation this time, so that the message quotes no raw control character.
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SchemaError(f"not JSON: {exc}") from None
    except RecursionError:
        # json.loads recurses per nesting level: a hostile or broken peer must not crash the reader.
        raise SchemaError("not JSON: nested too deeply") from None
    return decode_data(cls, clean_data(data))


# Records decoded elsewhere (a replay bundle, read by rigmon.snapshot) are cleaned as records:
# per record type, only the fields that can hold text are visited, and a record whose
# strings are all clean is returned as it is (no copy).


@cache
def _text_fields(cls: type) -> tuple[str, ...]:
    """Fields of record type ``cls`` whose type can hold a string (directly or nested)."""
    return tuple(name for name, tp in field_types(cls).items() if _holds_text(tp, frozenset({cls})))


def _holds_text(tp: Any, seen: frozenset[type]) -> bool:
    if tp is str or tp is Any:
        return True
    if record_fields(tp) is not None:
        if tp in seen:
            return False
        return any(_holds_text(t, seen | {tp}) for t in field_types(tp).values())
    if get_origin(tp) is Literal:
        # A closed set the decoder checked: no room for hostile text.
        return False
    return any(_holds_text(arg, seen) for arg in get_args(tp))


def clean_record(value: T) -> T:
    """A decoded record (wire record or dataclass, tuple, list, dict or scalar) with every string passed
    through `clean_text`; ``value`` itself when nothing needed cleaning."""
    return _clean_value(value)  # type: ignore[no-any-return]


def _clean_value(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, (tuple, list)):
        items = [_clean_value(v) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return type(value)(items)
    if isinstance(value, dict):
        pairs = [(_clean_value(k), _clean_value(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items())):
            return value
        return dict(pairs)
    cls: type = type(value)
    if record_field_names(cls) is not None:
        changes = {}
        for name in _text_fields(cls):
            old = getattr(value, name)
            new = _clean_value(old)
            if new is not old:
                changes[name] = new
        if not changes:
            return value
        if isinstance(value, msgspec.Struct):
            return msgspec.structs.replace(value, **changes)
        return dataclasses.replace(value, **changes)
    return value
