"""Hypothesis strategies for parser fuzzing: real inputs with tokens swapped, cut and spliced."""

from __future__ import annotations

import re

from hypothesis import strategies as st

#: Tokens that have broken parsers elsewhere: digits int() refuses, huge and signed numbers,
#: non-finite floats, separators, brackets, NUL and replacement characters.
NASTY = (
    "", " ", "-1", "0", "18446744073709551616", "99999999999999999999999", "1e999", "-1e999", "nan", "inf",
    "²", "٣", "¹²", "½", "0x1f", "1_000", "+5", "1.5.5", "\x00", "\ufffd", "\t", "\r", ":", ";", ",", "=", "/",
    "[", "]", "(", ")", "[U_]", "(F)", "[0]", "[9999999999]", "*", "$", "\\x0a", "Gb/s", "%", "K/sec",
)

_TOKEN = re.compile(r"\s+|[^\s\w.]|[\w.]+")


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


@st.composite
def mutated(draw: st.DrawFn, samples: tuple[str, ...]) -> str:
    """A real sample with some tokens replaced, dropped or duplicated, possibly cut short."""
    tokens = _tokens(draw(st.sampled_from(samples)))
    for _ in range(draw(st.integers(0, 4))):
        if not tokens:
            break
        i = draw(st.integers(0, len(tokens) - 1))
        action = draw(st.sampled_from(("replace", "drop", "dup", "random")))
        if action == "replace":
            tokens[i] = draw(st.sampled_from(NASTY))
        elif action == "drop":
            del tokens[i]
        elif action == "dup":
            tokens.insert(i, tokens[i])
        else:
            tokens[i] = draw(st.text(max_size=6))
    text = "".join(tokens)
    if draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    return text


def fuzz_text(*samples: str) -> st.SearchStrategy[str]:
    """Mutated samples, or plain random text now and then."""
    return st.one_of(mutated(samples), mutated(samples), mutated(samples), st.text(max_size=200))
