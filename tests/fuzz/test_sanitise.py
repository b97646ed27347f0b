"""Properties of the text sanitiser (rigmon.cluster.sanitise) under hypothesis.

`clean_text` is a per-character map: unsafe characters become visible escapes (tab, LF and
CR a space), every other character stays. Its output never holds an unsafe character,
cleaning it again changes nothing, and `decode_agent` gives exactly `clean_text` of every
string however the JSON spells it (escaped in lower or upper case, or raw UTF-8), so the
byte-level fast path never lets one through.
"""

from __future__ import annotations

import json
import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from rigmon.cluster.sanitise import clean_text, decode_agent, may_hold_unsafe
from rigmon.schema import Event
from rigmon.typed import to_data

#: Unsafe by the issue's list: C0, DEL, C1, bidi embeddings/overrides/isolates, line and paragraph separators.
UNSAFE_CODES = frozenset([*range(0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A),
                          0x2028, 0x2029])
#: Characters around the edges of those ranges, and a few that must pass (NBSP, ZWSP, LRM, BOM).
EDGES = "".join(chr(c) for c in (*UNSAFE_CODES, 0x20, 0x7E, 0xA0, 0x200B, 0x200E, 0x2027, 0x202F, 0x2065, 0x206A,
                                 0xFEFF, 0x1F600))
#: Text mixing those edges, markup-like brackets, backslashes and anything else.
texts = st.text(alphabet=st.one_of(st.sampled_from(EDGES + "[]/\\@=;u0"), st.characters(codec="utf-8")), max_size=60)
#: Text without an unsafe character (but with backslashes, quotes and non-ASCII that JSON escapes).
safe_texts = st.text(alphabet=st.characters(codec="utf-8").filter(lambda c: ord(c) not in UNSAFE_CODES), max_size=30)


def unsafe(char: str) -> bool:
    return ord(char) in UNSAFE_CODES


@given(texts)
@example("Evil[/]Dock\x1b]0;t\x07\x9b\u202e\u2028")
def test_output_holds_no_unsafe_character_and_is_stable(text: str) -> None:
    cleaned = clean_text(text)
    assert not any(unsafe(c) for c in cleaned)
    assert clean_text(cleaned) == cleaned


@given(texts)
def test_safe_text_is_unchanged(text: str) -> None:
    safe = "".join(c for c in text if not unsafe(c))
    assert clean_text(safe) == safe


@given(texts, texts)
def test_it_maps_each_character_on_its_own(a: str, b: str) -> None:
    assert clean_text(a + b) == clean_text(a) + clean_text(b)


@given(st.sampled_from(sorted(UNSAFE_CODES)))
def test_each_unsafe_character_reads_as_its_code(code: int) -> None:
    shown = clean_text(chr(code))
    if chr(code) in "\t\n\r":
        assert shown == " "
    else:
        assert re.fullmatch(r"\\x[0-9a-f]{2}|\\u[0-9a-f]{4}", shown)
        assert int(shown[2:], 16) == code


def spellings(data: object) -> list[bytes]:
    escaped = json.dumps(data)
    upper = re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), escaped)
    return [escaped.encode(), upper.encode(), json.dumps(data, ensure_ascii=False).encode("utf-8")]


@settings(max_examples=300)
@given(texts, texts, texts, texts)
def test_decoding_cleans_every_string_however_it_is_spelled(subject: str, message: str, key: str, value: str) -> None:
    event = Event(id="e1", at=1.0, kind="xid", severity="info", subject=subject, message=message, data={key: value})
    for raw in spellings(to_data(event)):
        for form in (raw, raw.decode("utf-8")):
            got = decode_agent(Event, form)
            assert got.subject == clean_text(subject)
            assert got.message == clean_text(message)
            assert got.data == {clean_text(key): clean_text(value)}
            if any(unsafe(c) for c in subject + message + key + value):
                assert may_hold_unsafe(form)


@settings(max_examples=600)
@given(safe_texts, st.sampled_from(sorted(UNSAFE_CODES)), safe_texts)
def test_one_unsafe_character_alone_is_noticed(before: str, code: int, after: str) -> None:
    # The byte-level fast path is the only guard when nothing else in the answer is suspect.
    text = before + chr(code) + after
    event = Event(id="e", at=0.0, kind="k", severity="info", subject=text, message="")
    for raw in spellings(to_data(event)):
        for form in (raw, raw.decode("utf-8")):
            assert may_hold_unsafe(form)
            assert decode_agent(Event, form).subject == clean_text(text)


@given(safe_texts)
def test_safe_text_decodes_unchanged(text: str) -> None:
    event = Event(id="e", at=0.0, kind="k", severity="info", subject=text, message=text, data={text: text})
    for raw in spellings(to_data(event)):
        assert decode_agent(Event, raw) == event
