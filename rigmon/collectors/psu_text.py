"""Pure parser of the ``text`` protocol: the lines existing sketches and loggers print (lenient mode).

A bare number, CSV or whitespace tables (with a header row naming the columns), key=value
and ``label: value`` pairs, one flat JSON object. No I/O, no clock; `rigmon.collectors.psu_rail`
feeds lines in and keeps the header.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from rigmon.collectors.psu_lines import (
    MAX_ABS_AMPS,
    MAX_ABS_VOLTS,
    LineError,
    RailWindow,
    Triple,
    check_printable,
)
from rigmon.lazy_re import lazy_compile


@dataclass(frozen=True, slots=True)
class TextHeader:
    """A header row naming the columns (``Timestamp,Voltage[V],Current[A]``, ``BUS_V  CURRENT_A``)."""

    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TextFields:
    """The numeric fields of one text line, by key (a name, a label, or a column number).

    ``columns`` is how many fields a positional line (CSV or a whitespace table) has, to
    match it against a header; ``None`` for key=value and JSON lines, which name their values.
    ``comma_between_digits``: the line was split at a comma between two digits and none of
    its numbers has a decimal point, so the comma may be a decimal comma (``12,061`` is
    12.061 V in a German locale, not 12 and 61): `text_window` reads such a line only as
    positional values under a header of as many columns.
    """

    values: dict[str, float]
    columns: int | None = None
    comma_between_digits: bool = False
    units: dict[str, str] = field(default_factory=dict)
    """The unit family (``V``, ``A``, ``W``) of each value that was printed with a unit, by the same keys."""


# A number with an optional unit glued on or after a space: 12.061, 12034mV, 1.2 A, -3e-2V.
_NUMBER = lazy_compile(r"([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?)\s*([A-Za-z]{0,3})")
# The numbers in a longer value ("3099  0.58V", "3099    -->   580.94 mV"), each with its unit.
_NUMBERS = lazy_compile(r"(?<![\w.])([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?)\s*([A-Za-z]{1,3})?(?![\w.])")
_UNIT_SCALE: dict[str, tuple[str, float]] = {
    "v": ("V", 1.0), "mv": ("V", 1e-3), "uv": ("V", 1e-6), "kv": ("V", 1e3),
    "a": ("A", 1.0), "ma": ("A", 1e-3), "ua": ("A", 1e-6),
    "w": ("W", 1.0), "mw": ("W", 1e-3), "kw": ("W", 1e3),
}
# A unit after a space in a whitespace-separated line (``V=12030 mV I=3200 mA``, ``12030 mV``), which
# splitting at the space parted from its number: 12030 V (dropped) and 3200 A (read as a current).
_SPACED_UNIT = lazy_compile(r"(?<=[0-9.])\s+((?i:mv|uv|kv|v|ma|ua|a|mw|kw|w))(?=\s|$)")
_HEADER_NAME = lazy_compile(r"[A-Za-z_][A-Za-z0-9_\[\]().%/ -]{0,40}")
_LABEL = lazy_compile(r"\s*\"?([A-Za-z_][A-Za-z0-9_ .\[\]-]{0,40}?)\"?\s*")
_COMMA_BETWEEN_DIGITS = lazy_compile(r"[0-9],[0-9]")


def _scaled(value: float, unit: str) -> tuple[float, str | None] | None:
    """``value`` in its unit family's base unit (mV -> V); ``None`` for an unknown unit."""
    if not unit:
        return value, None
    known = _UNIT_SCALE.get(unit.lower())
    if known is None:
        return None
    family, factor = known
    # Round away binary noise of the unit scaling (12030 mV is 12.03 V, not 12.030000000000001).
    return round(value * factor, 9), family


def _text_number(text: str) -> tuple[float, str | None] | None:
    """A number with its unit family (``V``, ``A``, ``W``) scaled to the base unit, or None."""
    match = _NUMBER.fullmatch(text.strip())
    if match is None:
        return None
    number = _scaled(float(match.group(1)), match.group(2))
    if number is not None and not math.isfinite(number[0]):
        raise LineError("nonsense", "number out of range")
    return number


def _value_with_unit(text: str) -> tuple[float, str | None] | None:
    """The value of a ``label: raw value`` pair: the one number that carries a unit.

    ``AIN0: 3099  0.58V`` (Adafruit ADS1X15 examples: raw count, then volts) is 0.58 V; a
    value with several unitless numbers says nothing.
    """
    with_unit = []
    for m in _NUMBERS.finditer(text):
        if m.group(2):
            number = _scaled(float(m.group(1)), m.group(2))
            if number is not None and number[1] is not None:
                with_unit.append(number)
    if len(with_unit) != 1:
        return None
    if not math.isfinite(with_unit[0][0]):
        raise LineError("nonsense", "number out of range")
    return with_unit[0]


def parse_text_line(line: str, header_names: Collection[str] = ()) -> TextFields | TextHeader | None:
    """Parse a line of the formats existing sketches print.

    Accepted: a bare number (``12.061``, ``12034mV``); CSV, tab/semicolon separated or
    whitespace-aligned values with or without a header (``2025-11-30 12:34:56.123,12.345,1.234,15.234``);
    key=value with units (``V=12030 mV, I=1.2A``, ``V=12030 mV I=1200 mA``); Serial Plotter ``label:value`` pairs and
    ``label: raw value`` lines (the value with a unit); one flat JSON object
    (``{"Vout": 12.06, "Iout": 40.1}``). Positional values are keyed by their 0-based column
    number; a value with a glued unit is also keyed by its unit family (``V``, ``A``, ``W``)
    and scaled to it (mV to V).

    Args:
        line: one line without its terminator.
        header_names: column names the configuration reads by: a whitespace-separated line
            of words is a header only when it names one of them (a banner is words too).

    Returns:
        The numeric fields; a header; or ``None`` for text that carries no number (banners,
        ``[INFO]`` lines).

    Raises:
        LineError: over-long, non-printable, malformed JSON, or a non-finite number.
    """
    check_printable(line, tabs=True)
    text = line.strip()
    if text.startswith("{"):
        return _text_json(text)
    if text.startswith("["):
        return None
    sep = "," if "," in text else ";" if ";" in text else "\t" if "\t" in text else None
    if sep is None:
        # V=12030 mV: the unit stays with its number (as in a separated field, "12030 mV" is one).
        text = _SPACED_UNIT.sub(r"\1", text)
    parts = text.split(sep) if sep else text.split()
    values: dict[str, float] = {}
    units: dict[str, str] = {}
    words: list[str] = []
    keyed = False
    decimal_point = False
    for index, part in enumerate(parts):
        key, value_text, rest_of_line = _split_pair(part, text if sep is None else None)
        if key is None:
            number = _text_number(part)
            if number is None:
                words.append(part.strip())
                continue
            decimal_point = decimal_point or "." in part
            values[str(index)] = number[0]
            if number[1] is not None:
                units[str(index)] = number[1]
                if number[1] not in values:
                    values[number[1]] = number[0]
                    units[number[1]] = number[1]
        else:
            keyed = True
            number = _text_number(value_text) or _value_with_unit(value_text)
            if number is not None:
                decimal_point = decimal_point or "." in value_text
                values[key] = number[0]
                if number[1] is not None:
                    units[key] = number[1]
            if rest_of_line:
                # "label: raw value" took the rest of the line.
                break
    if values:
        ambiguous = sep == "," and not decimal_point and _COMMA_BETWEEN_DIGITS.search(text) is not None
        return TextFields(values, None if keyed else len(parts), ambiguous, units)
    names = tuple(w for w in words if w)
    if len(names) == len(parts) >= 2 and all(_HEADER_NAME.fullmatch(n) for n in names):
        if sep or any(n in header_names for n in names):
            return TextHeader(names)
    return None


def _split_pair(part: str, whole: str | None) -> tuple[str | None, str, bool]:
    """``(key, value text, took the rest)`` of a ``key=value``/``key: value`` part.

    ``(None, part, False)`` when it is not a pair. In a whitespace-separated line (``whole``
    given) a bare ``label:`` takes the rest of the line as its value (``AIN0: 3099  0.58V``).
    """
    for mark in ("=", ":"):
        key, sep, value = part.partition(mark)
        if sep:
            label = _LABEL.fullmatch(key)
            if label is None:
                return None, part, False
            if whole is not None and not value.strip():
                # The label is all that comes before the mark, words included: Adafruit's INA219
                # example prints "Bus Voltage:   12.03 V" and "Shunt Voltage: 0.50 mV", which
                # are two channels, not two "Voltage" values.
                before, _, rest = whole.partition(mark)
                full = _LABEL.fullmatch(before)
                return (label if full is None else full).group(1), rest, True
            return label.group(1), value, False
    return None, part, False


def _text_json(text: str) -> TextFields:
    # {"v_in": 12.04, "i_in": 1.2, "ok": true}
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise LineError("malformed", "not a JSON object") from None
    if not isinstance(data, dict):
        raise LineError("malformed", "not a JSON object")
    values: dict[str, float] = {}
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        number = float(value)
        if not math.isfinite(number):
            raise LineError("nonsense", f"{key}: not finite")
        values[str(key)] = number
    return TextFields(values)


def text_window(
    fields: TextFields, header: TextHeader | None, channels: Mapping[str, str], scale: Mapping[str, float]
) -> RailWindow | None:
    """Turn a text line's fields into a one-sample window of the configured channels.

    Args:
        fields: the parsed line.
        header: the last header row seen, naming the columns.
        channels: rigmon channel (``v``, ``vpsu``, ``i``) -> field key, header name or column.
        scale: multiplier per channel to volts or amperes.

    Returns:
        The window, or ``None`` when the line carries none of the channels, or is a
        positional line that does not fit the header's columns (a register dump, a stray
        table between readings).

    Raises:
        LineError: a channel's value is beyond what a rail monitor can read (``nonsense``),
            the line may carry a decimal comma (``malformed``, see `TextFields`): never
            read ``12,061`` as 12 V; or a channel's value was printed in another unit
            (``malformed``: ``1200 mA`` for ``v``).
    """
    if header is not None and fields.columns is not None and fields.columns != len(header.names):
        return None
    values = dict(fields.values)
    units = dict(fields.units)
    if header is not None:
        for index, name in enumerate(header.names):
            if str(index) in fields.values:
                values.setdefault(name, fields.values[str(index)])
                if str(index) in fields.units:
                    units.setdefault(name, fields.units[str(index)])
    # A header printed with as many comma-separated columns says the comma separates, and so do
    # channels that read every column of a bare CSV line (`v = "0"`, `i = "1"` and `12034,1520`):
    # a column no channel reads (`12,061` with `v = "0"`) may be a decimal comma's fraction.
    ambiguous = fields.comma_between_digits and (header is None or fields.columns is None) and (
        fields.columns is None or not set(map(str, range(fields.columns))) <= set(channels.values()))
    volts: dict[str, Triple] = {}
    amps: dict[str, Triple] = {}
    for channel, source in channels.items():
        if source not in values:
            continue
        if ambiguous:
            raise LineError("malformed", "a comma between digits and no decimal point: a decimal comma?")
        family = "V" if channel.startswith("v") else "A"
        if units.get(source, family) != family and channel not in scale:
            # "Current: 1200.00 mA" mapped to v read as a 1.2 V rail: a critical sag that never was.
            # With a scale the unit is the operator's to convert (a shunt's mV to amperes).
            raise LineError("malformed", f"{channel} reads {source!r}, a value in {units[source]}, not {family}: "
                                         f"map psu.channels.{channel} to one in {family}")
        # Rounded like a unit's scaling: 12030 with scale 0.001 is 12.03 V, not 12.030000000000001.
        value = round(values[source] * scale.get(channel, 1.0), 9)
        limit = MAX_ABS_VOLTS if channel.startswith("v") else MAX_ABS_AMPS
        if not math.isfinite(value) or abs(value) > limit:
            raise LineError("nonsense", f"{channel}={value:g} beyond {limit:g}")
        (volts if channel.startswith("v") else amps)[channel] = Triple(value, value, value)
    if not volts and not amps:
        return None
    return RailWindow(seq=None, up_ms=None, win_ms=None, samples=1, volts=volts, amps=amps)
