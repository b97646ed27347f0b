"""Rule ``subject`` and ``message`` templates: `str.format` syntax, rendered with a fallback when a field is missing.

A field may be divided by a number to write it in a larger unit: ``{value/1000:g} Gb/s`` of a
speed read in Mb/s (the alarm's value stays the reading). A divided field takes a conversion and a
format spec as any field does (``{value/1000!r}``, ``{value/2.5:.1f}``).

A dotted name given whole among the fields is that field (``{raid.name}``: the engine gives the fields of
the records a match sits in under their step's name); otherwise it reads an attribute, as `str.format` does.
"""

from __future__ import annotations

import math
import string
from collections.abc import Mapping, Sequence
from typing import Any


def _divisor(name: str) -> tuple[str, float | None]:
    """``value/1000`` -> ``("value", 1000.0)``; a name without ``/`` -> ``(name, None)``.

    Raises:
        ValueError: what follows ``/`` is not a positive number.
    """
    if "/" not in name:
        return name, None
    base, _, by = name.partition("/")
    try:
        divisor = float(by)
    except ValueError:
        divisor = math.nan
    if not (math.isfinite(divisor) and divisor > 0):
        raise ValueError(f"field {{{name}}}: divide by a positive number ({{{base}/1000}})")
    return base, divisor


def _divided(value: Any, divisor: float | None) -> Any:
    """``value`` divided by ``divisor`` (none: as it is).

    Raises:
        TypeError: ``value`` is not a number (text, a boolean): the template does not fit.
    """
    if divisor is None:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{value!r} is not a number")
    return value / divisor


class _Formatter(string.Formatter):
    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        if "." in field_name and field_name in kwargs:
            return kwargs[field_name], field_name  # ``raid.name``, given whole
        # A divided field is a name and a number, whole: ``string.Formatter`` splits ``value/2.5`` at its
        # "." and looks for an attribute "5" of a field ``value/2`` (the template gave its fallback).
        if "/" in field_name and field_name not in kwargs:
            name, divisor = _divisor(field_name)
            if name not in kwargs:
                raise KeyError(field_name)
            return _divided(kwargs[name], divisor), field_name
        return super().get_field(field_name, args, kwargs)


_FORMATTER = _Formatter()


_FORMAT_ERRORS = (KeyError, IndexError, ValueError, TypeError, AttributeError)


def render(template: str, fields: Mapping[str, Any], fallback: str) -> str:
    """``template`` formatted with ``fields``; ``fallback`` when a field is missing or does not fit."""
    if not template:
        return fallback
    try:
        return _FORMATTER.vformat(template, (), fields)
    except _FORMAT_ERRORS:
        return fallback


class Template:
    """A rule's ``subject`` or ``message`` template, parsed once; renders exactly as `render`.

    Every subject of every rule is rendered on every frame: ``string.Formatter`` re-parses
    the template and dispatches through several methods per field each time. A template
    whose fields are plain names (``gpu:{index}``, ``{value:.2f} V``, ``{value/1000:g} Gb/s``) is
    split once into literal text and (name, format spec, divisor) and joined with ``format()``; any other
    (attribute or index access, ``!r`` conversions, nested specs, positional fields, bad
    syntax) goes through `render`.
    """

    __slots__ = ("text", "_parts", "names")

    def __init__(self, text: str) -> None:
        self.text = text
        self._parts = _compile(text)
        #: The fields the template names, each with the name it is looked up by when not given whole
        #: (``("raid.name", "raid")``, ``("value", "value")`` for ``{value/1000:g}``).
        self.names: tuple[tuple[str, str], ...] = _field_names(text)

    def lacks(self, fields: Mapping[str, Any]) -> bool:
        """Whether a field the template names is not in ``fields`` (whole, or its head for ``{value.real}``)."""
        return any(name not in fields and head not in fields for name, head in self.names)

    @property
    def compiled(self) -> bool:
        """Whether the template renders without ``string.Formatter``."""
        return self._parts is not None

    def render(self, fields: Mapping[str, Any], fallback: str) -> str:
        """The template formatted with ``fields``; ``fallback`` when a field is missing or does not fit."""
        parts = self._parts
        if parts is None:
            return render(self.text, fields, fallback)
        if not parts:
            return fallback  # an empty template
        try:
            # The divisor's call only where one is written: every subject is rendered on every frame.
            return "".join([literal + format(fields[name] if divisor is None else _divided(fields[name], divisor),
                                             spec) if name is not None else literal
                            for literal, name, spec, divisor in parts])
        except _FORMAT_ERRORS:
            return fallback


def check_template(text: str) -> None:
    """Refuse a template that could never render (it would always give the fallback).

    Raises:
        ValueError: a brace without its pair, a positional field (``{}``, ``{0}``: the fields have
            names), or a conversion other than ``!r``, ``!s`` or ``!a``.
    """
    try:
        parsed = list(_FORMATTER.parse(text))
    except ValueError as exc:
        raise ValueError(f"{exc} (write a literal brace as {{{{ or }}}})") from None
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name or name.split(".", 1)[0].split("[", 1)[0].isdigit():
            raise ValueError(f"field {{{name}}} has no name (fields are named: {{value}}, {{subject}}, ...)")
        _divisor(name)
        if conversion not in (None, "r", "s", "a"):
            raise ValueError(f"field {{{name}!{conversion}}}: unknown conversion !{conversion} (!r, !s or !a)")
        if spec and "{" in spec:
            check_template(spec)


def _compile(text: str) -> tuple[tuple[str, str | None, str, float | None], ...] | None:
    """Literal text and named fields (each with its divisor) of a template; ``None`` when it needs
    the general formatter."""
    try:
        parsed = list(_FORMATTER.parse(text))
    except ValueError:
        return None
    parts: list[tuple[str, str | None, str, float | None]] = []
    for literal, name, spec, conversion in parsed:
        if name is None:
            parts.append((literal, None, "", None))
            continue
        try:
            name, divisor = _divisor(name)
        except ValueError:
            return None
        if conversion is not None or not name.isidentifier() or (spec and ("{" in spec or "}" in spec)):
            return None
        parts.append((literal, name, spec or "", divisor))
    return tuple(parts)


def _field_names(text: str) -> tuple[tuple[str, str], ...]:
    """The fields ``text`` names (divisors taken off), each with its head (the name before ``.`` or ``[``)."""
    try:
        parsed = list(_FORMATTER.parse(text))
    except ValueError:
        return ()
    names: list[tuple[str, str]] = []
    for _, name, _, _ in parsed:
        if not name:
            continue
        base = name.partition("/")[0]
        names.append((base, base.split(".", 1)[0].split("[", 1)[0]))
    return tuple(names)
