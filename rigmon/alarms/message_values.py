"""A reading written as an alarm's message writes its value: the same decimals and unit."""

from __future__ import annotations

from rigmon.alarms.values import number
from rigmon.lazy_re import lazy_compile
from rigmon.schema import Alarm, EventValue

# A number in an alarm message and the unit after it: "11.255 V", "0.120 mOhm/day",
# "10000 Mb/s", "71 °C". "rose by 12 in 60 s" has no unit after 12.
_NUMBER_UNIT = lazy_compile(
    r"(?<![\w.])(?P<number>\d+(?:\.(?P<decimals>\d+))?)"
    r"(?:\s?(?P<unit>%|°C|[munµkMGT]?(?:Ohm|Ω|Hz|V|A|W|B|b|s|C)(?:/(?:s|day|h|min))?)(?![\w/]))?")


#: Divisors a message may write a reading with, the reading's own unit first: a speed read in
#: Mb/s written ``{value/1000:g} Gb/s`` (see `rigmon.alarms.templates`).
_DIVISORS = (1.0, 1e3, 1e6, 1e9)


def written(message: str, value: float) -> tuple[int, str, float] | None:
    """How ``message`` writes ``value``: its decimals, the unit after it (``""`` for none) and the
    divisor it was written with (``1000``: ``20 Gb/s`` of ``20000`` Mb/s; a divided figure counts
    only with a unit after it), or ``None`` when the message does not hold it."""
    for divisor in _DIVISORS:
        for m in _NUMBER_UNIT.finditer(message):
            if divisor != 1.0 and not m.group("unit"):
                continue
            decimals = len(m.group("decimals") or "")
            if abs(float(m.group("number")) - abs(value) / divisor) <= 0.5 * 10.0 ** -decimals + 1e-9:
                return decimals, m.group("unit") or "", divisor
    return None


def reading_text(alarm: Alarm, value: EventValue) -> str:
    """``value`` (a reading of ``alarm``'s rule, ``value_now`` say) as the alarm's message writes its
    worst value, ``alarm.value``: ``11.608 V`` beside ``12 V rail minimum 11.255 V is below 11.7 V``,
    ``40 Gb/s`` beside ``link thunderbolt0 runs at 20 Gb/s`` (a speed read in Mb/s). A reading the
    message does not write is given as it is (``11.6083``)."""
    v = number(value)
    if v is None:
        return str(value)
    worst = number(alarm.value)
    how = written(alarm.message, worst) if worst is not None else None
    if how is None:
        return _plain(v)
    decimals, unit, divisor = how
    # A divided figure written without decimals was written as the screens write one (``{:g}``: 2.5 Gb/s).
    text = f"{v / divisor:g}" if divisor != 1.0 and not decimals else f"{v / divisor:.{decimals}f}"
    return f"{text} {unit}" if unit else text


def _plain(v: float) -> str:
    """A reading no message writes: whole numbers in full (an energy counter's ``123456789``, not
    ``{:g}``'s ``1.23457e+08``), large ones to a decimal, others to six significant figures (``11.6083``)."""
    if v.is_integer() and abs(v) < 1e18:
        return str(int(v))
    if abs(v) >= 1e6:
        return f"{v:.1f}"
    return f"{v:.6g}" if abs(v) >= 1e-4 else repr(v)
