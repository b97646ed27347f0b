"""A selector's text: quoted values, and the column where a text that breaks the grammar breaks."""

from __future__ import annotations

from typing import Any

import pytest

from rigmon.alarms.selector import SelectorError, parse_selector
from rigmon.alarms.selector_text import written_value


@pytest.mark.parametrize(("text", "says", "column"), [
    # An unclosed quote swallowed the conditions after it into one value ("abc,kind=x").
    ("gpus[name='abc,kind=x].power_w", "quote ' not closed", 11),
    ('gpus[name="abc].power_w', 'quote " not closed', 11),
    ("gpus[ name = 'abc", "quote ' not closed", 14),
    # Text after the closing quote: there is no escape (the value was read as a'b, o\'brien).
    ("gpus[name='a'b].power_w", "'b' after the quoted value of 'name'", 14),
    ("gpus[name='o\\'brien'].power_w", "there is no escape: quote a value holding ' with the other quote", 15),
    # A plain value ending in a quote was read without it (eth0).
    ("net[name=eth0'].speed_mbps", "the value of 'name' ends with a quote that opens none", 14),
    ('net[kind=ethernet,name=eth0"].mtu', "quote the whole value: name='...'", 28),
    # An empty value matches nothing ever: a missing reading is null ('' was read as a value).
    ("net[name=].speed_mbps", "no value for 'name'", 10),
    ("net[name=''].speed_mbps", "no value for 'name' (a missing reading is null, which no value equals)", 10),
    ("net[kind=ethernet, name = \"\"].mtu", "no value for 'name'", 27),
    ("peer_paths[key_mismatch=false,].state", "empty condition (use [*], [N]", 31),
    ("peer_paths[,key_mismatch=false].state", "empty condition", 12),
    ("gpus[=x].power_w", "no field name before '='", 6),
    ("peer_paths[key_mismatch=false, peer-flooded=false].state", "'peer-flooded' is not a field name", 32),
    ("net[name=a,b].mtu", ("'b' has no '=' (use [*], [N], [field=value] or [field=value,field=value]); "
                           "a value holding ',' is quoted: [name='a,b']"), 12),
    # A bracket in a plain value.
    ("gpus[name=a]b].power_w", ("unexpected 'b' (after a filter comes '.', '[' or the end; a value holding ']' "
                                "is quoted"), 13),
    ("gpus[name=a[b].power_w", "'[' inside a filter (a value holding '[' or ']' is quoted", 12),
    ("gpus[name=x]].power_w", "unexpected ']'", 13),
    ("gpus[name=x", "'[' not closed", 5),
    ("gpus..state", "a field name or * expected, got '.'", 6),
    ("gpus.", "a field name or * expected, got the end", 6),
    ("  gpus[*]-state", "unexpected '-'", 8),  # counted in the selector as quoted: blanks around it are not
])
def test_a_text_that_breaks_the_grammar_is_refused_at_its_column(text: str, says: str, column: int) -> None:
    with pytest.raises(SelectorError) as info:
        parse_selector(text)
    message = str(info.value)
    assert f'selector "{text.strip()}" at column {column}: ' in message, message
    assert says in message, message


NET: dict[str, Any] = {"net": [
    {"name": "a]b", "kind": "ethernet", "mtu": 1},
    {"name": "o'brien,jr", "kind": "ethernet", "mtu": 2},
    {"name": "'x'", "kind": "ethernet", "mtu": 3},
    {"name": "x", "kind": "ethernet", "mtu": 4},
    {"name": 'say "hi"', "kind": "ethernet", "mtu": 5},
    {"name": " padded ", "kind": "ib", "mtu": 6},
]}


@pytest.mark.parametrize(("text", "mtus"), [
    ("net[name='a]b'].mtu", [1]),
    ("net[kind=ethernet, name = \"a]b\" ].mtu", [1]),
    ("net[name=\"o'brien,jr\",kind=ethernet].mtu", [2]),
    # Inside quotes the other quote is text: "'x'" is the value 'x', quotes and all.
    ("net[name=\"'x'\"].mtu", [3]),
    ("net[name='say \"hi\"'].mtu", [5]),
    ("net[name=' padded '].mtu", [6]),  # blanks inside quotes are the value's
    ("net[name = x ].mtu", [4]),  # around a plain value they are not
])
def test_a_quoted_value_is_everything_between_its_quotes(text: str, mtus: list[int]) -> None:
    assert parse_selector(text).values(NET) == mtus


@pytest.mark.parametrize("value", ["eth0", "a,b", "a]b", "a[0]", " eth0", "o'brien", "o'brien,jr", "'x'", 'say "hi"',
                                   "a=b", "enp1s0.10"])
def test_a_value_as_written_parses_back_to_itself(value: str) -> None:
    """Messages quote filters (the rules check's hint to write ``[a=x,b=y]``): they must parse as meant."""
    (step,) = parse_selector(f"net[name={written_value(value)}]").steps
    assert step.filters[0].value == value


def test_the_column_points_into_the_selector_as_shown_with_both_quote_kinds() -> None:
    # Shown through repr, a selector holding both quote kinds had its ' escaped: the columns after it
    # pointed one character early in the message.
    text = """net[name="o'b"][speed=].mtu"""
    with pytest.raises(SelectorError) as info:
        parse_selector(text)
    message = str(info.value)
    shown = message.split('"', 1)[1].rsplit('" at column', 1)[0]
    column = int(message.rsplit("at column ", 1)[1].split(":", 1)[0])
    assert shown == text and shown[column - 1 :].startswith("]")
