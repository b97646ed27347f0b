"""Strings from agents and hardware made plain text in REPORT.md's Markdown (table cells, list items, headings).

A node's name, a GPU's name, a job's command line, a mark's text, an alarm's message or a
collector's error is text the report quotes, never Markdown: a mark ``<b>x</b>`` or ``*x*``
must not render bold, a ``|`` must not split a table row, ``[text](url)`` must not become a
link, and a leading ``#`` must not start a heading where the string opens a line (a list
item's first word). `md_text` backslash-escapes only the characters that could act
(CommonMark and GitHub's table and strikethrough extensions), so ordinary text reads as it is
with ``cat``: words, ``.``, ``-``, ``:`` and ``/`` are left alone. Control characters and line
breaks are made visible or a space first (`rigmon.cluster.sanitise.clean_text`), so a string is
one line and a table row stays one row.
"""

from __future__ import annotations

import re

from rigmon.cluster.sanitise import clean_text
from rigmon.lazy_re import lazy_compile

#: Characters that act anywhere in a line: emphasis and strikethrough, code spans, HTML tags and
#: entities (``<`` and ``&``), a table's cell separator; a ``]`` that would close a link's or an
#: image's text (before ``(`` or ``[``, or at the end, where the report's own text follows); and a
#: backslash before any ASCII punctuation or at the end (it would escape what follows it).
#: A ``[`` and a ``]`` that cannot end a link stay as they are (``gpus[0].power_w``, ``\x1b[2J``):
#: a bare ``[x]`` is a link only with a ``[x]: url`` definition, which needs a ``[`` opening a
#: line (`_LEADING` escapes that one).
_INLINE = lazy_compile(r"[*`<&|~]|\](?=[(\[]|$)|\\(?=[!-/:-@\[-`{-~]|$)")
#: A run of underscores; it can open or close emphasis unless it stands between two letters or digits
#: (``psu_rail_low`` stays as it is: CommonMark never reads those as emphasis).
_UNDERSCORES = lazy_compile(r"_+")
#: What starts a block where the string opens a line (a list item's first word): a link reference
#: definition, footnote or task box (``[x]: url``, ``[^1]:``, ``[ ]``), a quote, a heading
#: (``# x``, not ``#3``), a list item or a thematic break (``- x``, ``+ x``, ``---``; not ``-5 dBm``),
#: a numbered item (``1. x``, ``2) x``; not ``11.255``, whose escape would go after the digits).
_LEADING = lazy_compile(r"^(?:[\[>]|#{1,6}(?=\s|$)|\+(?=\s|$)|-(?=[\s-]|$)|\d{1,9}(?=[.)](?:\s|$)))")
#: A heading's closing sequence (``## node #`` would read as the node ``node``).
_TRAILING_HASHES = lazy_compile(r"(?:^|(?<=\s))#+$")
#: Runs of backticks (a code span's fence must be longer than any of them).
_BACKTICKS = lazy_compile(r"`+")


def _underscores(match: re.Match[str]) -> str:
    text, start, end = match.string, match.start(), match.end()
    if 0 < start and end < len(text) and text[start - 1].isalnum() and text[end].isalnum():
        return match.group()
    return "\\_" * (end - start)


def _leading(match: re.Match[str]) -> str:
    found = match.group()
    return found + "\\" if found[0].isdigit() else "\\" + found


def md_text(value: object) -> str:
    """``value`` as Markdown that renders as exactly its text, on one line.

    Args:
        value: a string (or a value, written with ``str``) from an agent or the hardware.

    Returns:
        The text with the characters that could act backslash-escaped (``\\*``, ``\\|``,
        ``\\<``, ``\\[``, a leading ``\\#`` or ``\\-``), control characters made visible and line
        breaks made spaces, surrounding spaces stripped.
    """
    text = clean_text(str(value)).strip()
    text = _INLINE.sub(lambda m: "\\" + m.group(), text)
    text = _UNDERSCORES.sub(_underscores, text)
    text = _TRAILING_HASHES.sub(lambda m: "\\#" * len(m.group()), text)
    return _LEADING.sub(_leading, text, count=1)


def md_code(value: object) -> str:
    """``value`` as a Markdown code span (an event kind, a tier's name), whatever backticks it holds.

    The fence is one backtick longer than the longest run inside, padded with a space when the
    text starts or ends with one (CommonMark's rule), so nothing in it closes the span early.
    Not for a table cell: a ``|`` in a code span there still splits the row (use `md_text`).
    """
    text = clean_text(str(value)).strip()
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
