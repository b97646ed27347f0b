"""NVMe composite temperature against its limits: the drive's alarm bit, the over-warning judgement, its events."""

from __future__ import annotations

from rigmon.collectors.base import EventDraft
from rigmon.schema import NvmeReading


def parse_alarm(text: str | None) -> bool | None:
    """An hwmon ``*_alarm`` attribute (``"0"``/``"1"``) as a flag; ``None`` when absent or garbled."""
    if text is None:
        return None
    word = text.strip()
    return True if word == "1" else False if word == "0" else None


def judge_over_max(temp_c: float | None, temp_max_c: float | None, alarm: bool | None) -> bool | None:
    """Whether a drive is at or over its warning threshold (WCTEMP, hwmon ``temp1_max``).

    The composite at or above the threshold says so; the drive's own temperature warning bit
    (``temp1_alarm``, set from the SMART log at the over-temperature threshold) says so too, when
    the temperature or the threshold cannot be read. ``None`` when neither can be told.
    """
    if temp_c is not None and temp_max_c is not None:
        return temp_c >= temp_max_c or alarm is True
    return True if alarm else alarm


def md_arrays_data(md_arrays: tuple[str, ...]) -> str | None:
    """An NVMe event's ``md_arrays``: the md arrays holding the drive, space-separated (``md127 md126``),
    ``None`` for a drive in no array. Event data are single values, never lists."""
    return " ".join(md_arrays) or None


def temp_reason(temp_c: float | None, temp_max_c: float | None, temp_crit_c: float | None,
                md_arrays: tuple[str, ...]) -> str:
    """A drive at or over its warning threshold in words, for alarm messages and screens:
    ``82.05 °C, at or over its warning limit 81.85 °C (critical 84.85 °C), in md127``."""
    if temp_max_c is None:
        text = f"{_temp(temp_c)}, its temperature warning bit set"
    else:
        text = f"{_temp(temp_c)}, at or over its warning limit {_temp(temp_max_c)}"
    if temp_crit_c is not None:
        text += f" (critical {_temp(temp_crit_c)})"
    return f"{text}, in {', '.join(md_arrays)}" if md_arrays else text


def temp_events(r: NvmeReading, was_hot: bool | None, subject: str, label: str) -> list[EventDraft]:
    """The event of a drive reaching its warning threshold (also when first seen there) or cooling
    below it again, judged against the last judgement read (``was_hot``; ``None``: none yet)."""
    if r.temp_over_max is None or r.temp_over_max == was_hot:
        return []
    data: dict[str, str | int | float | bool | None] = {
        "serial": r.serial, "temp_c": r.temp_c, "temp_max_c": r.temp_max_c, "temp_crit_c": r.temp_crit_c,
        "md_arrays": md_arrays_data(r.md_arrays)}
    label = f"NVMe {label}"
    if r.temp_over_max:
        return [EventDraft("nvme_temp_over_max", "warning", subject,
                           f"{label} at {r.temp_warning_reason}: it throttles its reads; check the enclosure's "
                           f"fan and airflow", data)]
    if was_hot is None:
        return []
    where = f" in {', '.join(r.md_arrays)}" if r.md_arrays else ""
    return [EventDraft("nvme_temp_normal", "info", subject,
                       f"{label}{where} back below its warning limit: {_temp(r.temp_c)} of {_temp(r.temp_max_c)}",
                       data)]


def _temp(value: float | None) -> str:
    # Two decimals as the kernel's Kelvin conversion gives them (81.85 °C), not a rounded 81.8.
    return "? °C" if value is None else f"{round(value, 2):g} °C"
