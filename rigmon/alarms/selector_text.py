"""A selector's text read into steps and filters, and where a text that breaks the grammar breaks it.

Grammar (what each part selects: `rigmon.alarms.selector`)::

    selector := step ("." step)*
    step     := NAME filter* | "*" filter*
    filter   := "[*]" | "[" INTEGER "]" | "[" cond ("," cond)* "]"
    cond     := NAME "=" VALUE
    VALUE    := "'" TEXT "'" | '"' TEXT '"' | PLAIN

Blanks around a condition, its name and its value are not part of them. A quoted value is
everything between its quotes (blanks, commas, dots, brackets, the other kind of quote); there
is no escape, so a value holding an apostrophe is quoted with double quotes
(``[name="o'brien,jr"]``). A quote opens only where a value starts: inside a plain value
(``[name=o'brien]``) it is text. A plain value holds no comma, no bracket, and does not end with
a quote (``[name=eth0']`` is a typo for ``'eth0'``, not a name). A value is never empty: a
missing reading is ``null``, which no value equals.

A text that breaks the grammar raises `SelectorError`, naming the filter and the column (from 1,
in the selector as the message quotes it) where it breaks: an unclosed quote at the quote that
opened it, a ``[`` never closed at that ``[``.
"""

from __future__ import annotations

import re

import msgspec

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_POSITION_RE = re.compile(r"-?\d+")

#: The quotes a value may be quoted with.
QUOTES = "\"'"

_SHAPES = "(use [*], [N], [field=value] or [field=value,field=value])"


class SelectorError(ValueError):
    """A selector's text does not follow the grammar; the message says where."""


class Filter(msgspec.Struct, frozen=True, gc=False):
    """One ``[...]`` of a step: every item, a position, or a field equal to a value.

    The selector's parts are frozen `msgspec.Struct`s, not dataclasses (cheaper to define at
    import and to build), untracked by the cycle collector (``gc=False``): frozen, holding
    only strings, numbers, tuples of parts and dicts of strings, none can be in a cycle.
    """

    kind: str
    """``all``, ``position`` or ``equals``."""
    field: str = ""
    value: str = ""
    position: int = 0
    also: tuple[tuple[str, str], ...] = ()
    """``equals`` only: further ``(field, value)`` pairs the same item must equal too
    (``[key_mismatch=false,peer_flooded=false]``); empty for one field, the common case."""


class Step(msgspec.Struct, frozen=True, gc=False):
    """One dotted part of a selector: a field name (or ``*``) and its filters."""

    name: str
    filters: tuple[Filter, ...] = ()


def parse_steps(text: str) -> tuple[Step, ...]:
    """The steps of a selector's text (already stripped of surrounding blanks).

    Raises:
        SelectorError: empty, or the first place the text breaks the grammar, by column.
    """
    if not text:
        raise SelectorError("empty selector")
    steps: list[Step] = []
    at = 0
    while True:
        step, at = _step(text, at)
        steps.append(step)
        if at == len(text):
            return tuple(steps)
        if text[at] != ".":
            hint = ("after a filter comes '.', '[' or the end; a value holding ']' is quoted: [name='a]b']"
                    if "]" in (text[at], text[at - 1])
                    else "steps are joined by '.', each a field name or * with its [filters]")
            raise _error(text, at, f"unexpected {text[at]!r} ({hint})")
        at += 1


def _step(text: str, at: int) -> tuple[Step, int]:
    """The step starting at ``at``, and where the text goes on after it."""
    if text.startswith("*", at):
        name, end = "*", at + 1
    else:
        m = _NAME_RE.match(text, at)
        if m is None:
            got = repr(text[at]) if at < len(text) else "the end"
            raise _error(text, at, f"a field name or * expected, got {got}")
        name, end = m.group(), m.end()
    filters: list[Filter] = []
    while end < len(text) and text[end] == "[":
        flt, end = _filter(text, end)
        filters.append(flt)
    return Step(name=name, filters=tuple(filters)), end


def _filter(text: str, start: int) -> tuple[Filter, int]:
    """The filter whose ``[`` is at ``start``, and where the text goes on after its ``]``."""
    close, spans = _filter_spans(text, start)
    inner = text[start + 1:close]
    bare = inner.strip()
    if bare == "*":
        return Filter(kind="all"), close + 1
    if _POSITION_RE.fullmatch(bare):
        return Filter(kind="position", position=int(bare)), close + 1
    conditions: list[tuple[str, str]] = []
    for index, (begin, end) in enumerate(spans):
        key, value = _condition(text, begin, end, inner, index == 0)
        if any(key == seen for seen, _ in conditions):
            raise _filter_error(text, begin, inner, f"field {key!r} given twice")
        conditions.append((key, value))
    (field, value), *also = conditions
    return Filter(kind="equals", field=field, value=value, also=tuple(also)), close + 1


def _filter_spans(text: str, start: int) -> tuple[int, list[tuple[int, int]]]:
    """Where the filter opened at ``start`` closes, and the ``(begin, end)`` of each of its conditions.

    Commas and the closing ``]`` count outside quoted values only (``[name="a,b", kind=ethernet]``
    has two conditions). A quote opens only where a value starts (after the condition's first
    ``=`` and any blanks): an apostrophe inside a plain value (``name=o'brien,kind=ethernet``) is
    text, not the start of a quote that would swallow the conditions after it.
    """
    spans: list[tuple[int, int]] = []
    begin = start + 1
    quote, opened = "", 0
    value_starts = seen_equals = False
    for at in range(start + 1, len(text)):
        ch = text[at]
        if quote:
            if ch == quote:
                quote = ""
            continue
        if ch in ",]":
            spans.append((begin, at))
            if ch == "]":
                return at, spans
            begin, value_starts, seen_equals = at + 1, False, False
        elif ch == "[":
            raise _error(text, at, "'[' inside a filter (a value holding '[' or ']' is quoted: [name='a[0]'])")
        elif value_starts and ch in QUOTES:
            quote, opened, value_starts = ch, at, False
        else:
            value_starts = (ch == "=" and not seen_equals) or (value_starts and ch.isspace())
            seen_equals = seen_equals or ch == "="
    if quote:
        raise _error(text, opened, f"quote {quote} not closed (a quoted value ends at the same quote; "
                                   "there is no escape)")
    raise _error(text, start, "'[' not closed")


def _condition(text: str, begin: int, end: int, inner: str, first: bool) -> tuple[str, str]:
    """The ``(field, value)`` of the condition ``text[begin:end]`` of filter ``[inner]`` (its ``first``
    condition or a further one)."""
    part = text[begin:end]
    if not part.strip():
        raise _filter_error(text, begin, inner, f"empty condition {_SHAPES}")
    lead = begin + len(part) - len(part.lstrip())
    equals = part.find("=")
    if equals < 0:
        # After a condition, most likely the rest of a value with a comma that was not quoted.
        hint = "" if first else "; a value holding ',' is quoted: [name='a,b']"
        raise _filter_error(text, lead, inner, f"{part.strip()!r} has no '=' {_SHAPES}{hint}")
    key = part[:equals].strip()
    if not _NAME_RE.fullmatch(key):
        what = f"{key!r} is not a field name" if key else "no field name before '='"
        raise _filter_error(text, lead, inner, f"{what} {_SHAPES}")
    raw = part[equals + 1:]
    value = raw.strip()
    value_at = begin + equals + 1 + len(raw) - len(raw.lstrip())
    if value and value[0] in QUOTES:
        # The scan closed the quote inside this condition: only blanks may follow it.
        close = value.index(value[0], 1)
        if close + 1 < len(value):
            raise _filter_error(text, value_at + close + 1, inner,
                                f"{value[close + 1:]!r} after the quoted value of {key!r} (there is no "
                                f"escape: quote a value holding {value[0]} with the other quote)")
        value = value[1:close]
    elif value and value[-1] in QUOTES:
        raise _filter_error(text, value_at + len(value) - 1, inner,
                            f"the value of {key!r} ends with a quote that opens none (quote the whole "
                            f"value: {key}='...')")
    if not value:
        raise _filter_error(text, value_at, inner, f"no value for {key!r} (a missing reading is null, "
                                                   "which no value equals)")
    return key, value


def written_value(value: str) -> str:
    """A filter's value as a selector writes it, so that a path or hint quoted from a message parses
    back to the same filter: plain when it reads back as itself, else quoted (``"a,b"``, ``"a]b"``,
    ``" eth0"``), with double quotes unless it holds one. (A value holding both quotes that needs
    quoting has no written form: there is no escape.)"""
    plain = (value == value.strip() and not any(ch in value for ch in ",[]")
             and not (value and (value[0] in QUOTES or value[-1] in QUOTES)))
    if plain:
        return value
    quote = "'" if '"' in value else '"'
    return f"{quote}{value}{quote}"


def _error(text: str, at: int, reason: str) -> SelectorError:
    """The error of selector ``text`` breaking at index ``at``. The text is shown as it is written,
    between double quotes (not through ``repr``, whose escapes would shift the columns after them)."""
    return SelectorError(f'bad selector "{text}" at column {at + 1}: {reason}')


def _filter_error(text: str, at: int, inner: str, reason: str) -> SelectorError:
    """The error of filter ``[inner]`` of selector ``text`` breaking at index ``at``."""
    return SelectorError(f'bad filter [{inner}] in selector "{text}" at column {at + 1}: {reason}')
