"""`lazy_compile`: a module-level regular expression compiled when it is first used, not at import.

The collectors' parsers hold ~50 patterns; compiling them costs ~3 ms of every agent's start,
before its first frame, while a parser runs only where its hardware is (no /proc/mdstat, no
ADC line, no kernel log: never). A `LazyPattern` compiles on its first attribute access and
then keeps the compiled pattern's methods as its own attributes, so ``_HEADER.match(line)``
costs what it costs on a compiled pattern (one attribute lookup, one call) on every later use.
"""

from __future__ import annotations

import re
from typing import Any, AnyStr, Generic, cast

#: What a pattern is used for: copied from the compiled pattern on first use.
_ATTRIBUTES = ("match", "fullmatch", "search", "finditer", "findall", "sub", "subn", "split", "pattern", "flags",
               "groups", "groupindex")


class LazyPattern(Generic[AnyStr]):
    """A stand-in for ``re.compile(pattern, flags)`` that compiles on first use (see the module)."""

    def __init__(self, pattern: AnyStr, flags: int) -> None:
        self._source: tuple[AnyStr, int] = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        # Only attributes not (yet) copied get here: the first use, or a rarely used one.
        compiled = re.compile(*self._source)
        for attribute in _ATTRIBUTES:
            setattr(self, attribute, getattr(compiled, attribute))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"LazyPattern({self._source[0]!r}, {self._source[1]!r})"


def lazy_compile(pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """``re.compile(pattern, flags)``, compiled on first use; typed as the pattern it stands for.

    For module-level patterns used through their methods (``match``, ``search``, ``sub``...). Not
    for patterns handed to ``re`` functions or checked with ``isinstance(x, re.Pattern)``.
    """
    return cast("re.Pattern[AnyStr]", LazyPattern(pattern, flags))
