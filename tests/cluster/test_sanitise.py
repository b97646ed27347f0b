"""rigmon.cluster.sanitise: what `clean_text` makes of each unsafe character, and the fast path
that leaves clean answers (nearly all of them) exactly as the schema decodes them."""

from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path

import pytest

from rigmon.cluster.sanitise import clean_record, clean_text, decode_agent, may_hold_unsafe
from rigmon.schema import Event, Frame, SchemaError, decode, encode
from tests.tui.snapshot_apps.fake_agent import make_frame
from tests.tui.snapshot_apps.record_frames import FIXTURES


@pytest.mark.parametrize(("raw", "shown"), [
    ("Evil[/]Dock", "Evil[/]Dock"),
    ("\x1b]0;title\x07", r"\x1b]0;title\x07"),
    ("\x1b]52;c;ZXZpbA==\x07", r"\x1b]52;c;ZXZpbA==\x07"),
    ("\x1b[2J", r"\x1b[2J"),
    ("\x9b31m", r"\x9b31m"),
    ("\x85", r"\x85"),
    ("\x00\x7f", r"\x00\x7f"),
    ("a\tb\nc\r", "a b c "),
    ("\u202eevil\u202c", r"\u202eevil\u202c"),
    ("\u2066x\u2069\u2067\u2068", r"\u2066x\u2069\u2067\u2068"),
    ("line\u2028para\u2029", r"line\u2028para\u2029"),
    ("12 V · 11.38 V — ok ° mΩ 日本 \u200b", "12 V · 11.38 V — ok ° mΩ 日本 \u200b"),
    (r"C:\temp\x1b", r"C:\temp\x1b"),
])
def test_clean_text(raw: str, shown: str) -> None:
    assert clean_text(raw) == shown


def test_a_clean_string_is_returned_as_it_is() -> None:
    text = "node01 " * 10
    assert clean_text(text) is text


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.jsonl.gz")), ids=lambda p: p.name.split(".")[0])
def test_recorded_frames_take_the_fast_path_unchanged(path: Path) -> None:
    for line in gzip.decompress(path.read_bytes()).splitlines()[:20]:
        assert not may_hold_unsafe(line)
        assert not may_hold_unsafe(line.decode())
        assert decode_agent(Frame, line) == decode(Frame, line)


@pytest.mark.parametrize("raw", [
    b'{"a":"\\u001b"}', b'{"a":"\\u001B"}', b'{"a":"\\n"}', b'{"a":"\\u007F"}', b'{"a":"\\u0085"}',
    b'{"a":"\\u202E"}', b'{"a":"\\u2068"}', b'{"a":"\\u2029"}', '{"a":"\u009b"}'.encode(),
    '{"a":"\u202e"}'.encode(), '{"a":"\u2066"}'.encode(), '{"a":"\u2028"}'.encode(), b'{"a":"\x7f"}',
    '{"a":"\u202e"}'.encode("utf-16"),
])
def test_every_form_of_an_unsafe_character_is_noticed(raw: bytes) -> None:
    assert may_hold_unsafe(raw)


#: Every unsafe character, by code point.
UNSAFE_CODES = [*range(0x20), *range(0x7F, 0xA0), *range(0x2028, 0x202F), *range(0x2066, 0x206A)]


@pytest.mark.parametrize("code", UNSAFE_CODES, ids=lambda c: f"U+{c:04X}")
def test_each_unsafe_character_is_noticed_in_each_spelling(code: int) -> None:
    text = f"é {chr(code)} ok"
    escaped = json.dumps({"subject": text})
    upper = re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), escaped)
    for raw in (escaped, upper, json.dumps({"subject": text}, ensure_ascii=False)):
        assert may_hold_unsafe(raw) and may_hold_unsafe(raw.encode())
    assert clean_text(text) != text


@pytest.mark.parametrize("raw", [b'{"a":"\\u00e9 \\u2014 \\u00b0"}', '{"a":"é — ° · Ω"}'.encode(), b'{"a":"\\"q\\""}'])
def test_harmless_escapes_and_text_are_not_suspect(raw: bytes) -> None:
    assert not may_hold_unsafe(raw)


def test_decode_agent_reports_bad_json_as_the_schema_does() -> None:
    with pytest.raises(SchemaError, match="not JSON"):
        decode_agent(Frame, b"{")
    with pytest.raises(SchemaError, match="nested too deeply"):
        decode_agent(Frame, b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(SchemaError, match="bad Event"):
        decode_agent(Event, b'{"id": "\\u001b"}')


def test_clean_record_copies_only_what_changes() -> None:
    frame = make_frame("node01", "run1", 1, random.Random(1))
    assert clean_record(frame) is frame
    assert decode_agent(Frame, encode(frame)) == frame
    dirty = Event(id="e1", at=1.0, kind="xid", severity="info", subject="gpu:0", message="x\x1b[2J",
                  data={"k\x9b": "v"})
    cleaned = clean_record(dirty)
    assert cleaned.message == r"x\x1b[2J" and cleaned.data == {r"k\x9b": "v"}
    assert cleaned.subject is dirty.subject
    frames = [frame, dirty]
    assert clean_record(frames)[0] is frame
