"""Pure parsers of the kernel log formats rigmon reads: /dev/kmsg records, dmesg and journalctl -k text.

`rigmon.hw.kmsg.KmsgReader` hands over raw records (one /dev/kmsg read, or one line of a file
with its indented continuation lines); these functions turn them into `LogRecord`. No I/O,
no clock: a wall-clock time is taken only from a timestamp that says its own zone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, cast

from rigmon.collectors.sysfs_values import U64_DIGITS, U64_MAX
from rigmon.lazy_re import lazy_compile

#: ``auto`` recognises a character device as /dev/kmsg and a text file by its first line.
LogFormat = Literal["auto", "kmsg", "dmesg", "journal"]
TextFormat = Literal["kmsg", "dmesg", "journal"]
#: Level of a line whose log does not print one (dmesg, journalctl short): the kernel's
#: default message level (MESSAGE_LOGLEVEL_DEFAULT, KERN_WARNING), which NVRM lines carry.
DEFAULT_LEVEL = 4
#: dmesg -x / --decode level names (include/linux/kern_levels.h order).
LEVEL_NAMES = ("emerg", "alert", "crit", "err", "warn", "notice", "info", "debug")


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One kernel log record: level, sequence number, µs since boot, unescaped text, dictionary.

    ``ts_us`` is ``None`` when the log prints no boot-relative time; ``wall_at`` is Unix
    seconds when it prints an absolute time with its zone (``dmesg --time-format iso``,
    ``journalctl -o short-iso``). For text logs ``seq`` is the record's position in the file.
    """

    level: int
    facility: int
    seq: int
    ts_us: int | None
    message: str
    fields: dict[str, str] = field(default_factory=dict)
    wall_at: float | None = None


#: The name this record had when /dev/kmsg was the only source.
KmsgRecord = LogRecord

_ESCAPE = lazy_compile(r"\\x([0-9a-fA-F]{2})")


def unescape_kmsg(text: str) -> str:
    """Undo /dev/kmsg's ``\\xNN`` escaping of non-printable bytes and backslashes."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)


def _u64(text: str) -> int | None:
    """A kmsg header number: ASCII digits of at most a u64, as the kernel prints it; else ``None``.

    isascii(): str.isdigit() admits characters int() refuses ("²"). A longer number is a garbled
    record: int() fails past 4300 digits, and a sequence number of billions would count as lost.
    """
    if not (text.isascii() and text.isdigit() and len(text) <= U64_DIGITS):
        return None
    value = int(text)
    return value if value <= U64_MAX else None


def parse_kmsg_record(raw: str) -> LogRecord | None:
    """Parse one /dev/kmsg record (header, message, ``KEY=value`` continuation lines).

    Returns:
        The record, or ``None`` when the text is not a kmsg record.
    """
    first, _, rest = raw.partition("\n")
    # 4,51235,1843221988,-;NVRM: Xid (PCI:0000:1a:00): 79, GPU has fallen off the bus.
    # 6,2081,5144212,-,caller=T412;text   (extra header fields are ignored)
    header, sep, message = first.partition(";")
    parts = header.split(",")
    if not sep or len(parts) < 4:
        return None
    numbers = [_u64(p) for p in parts[:3]]
    if None in numbers:
        return None
    prefix, seq, ts_us = cast(list[int], numbers)
    fields: dict[str, str] = {}
    for line in rest.splitlines():
        #  DEVICE=+pci:0000:1a:00.0
        key, eq, value = line.strip().partition("=")
        if eq and line.startswith(" "):
            fields[key] = unescape_kmsg(value)
    return LogRecord(
        level=prefix & 7,
        facility=prefix >> 3,
        seq=seq,
        ts_us=ts_us,
        message=unescape_kmsg(message.rstrip("\n")),
        fields=fields,
    )


# dmesg -x:  "kern  :warn  : "; dmesg -r: "<4>"
_DMESG_DECODE = lazy_compile(r"^(?P<facility>[a-z]+)\s*:(?P<level>[a-z]+)\s*: ")
_DMESG_RAW = lazy_compile(r"^<(?P<prefix>\d{1,3})>")
# [    5.140900] text                              (dmesg)
# (at most 12 digits of seconds, 31 700 years: a longer number is a garbled line, not a time)
_DMESG_MONO = lazy_compile(r"^\[\s*(?P<s>\d{1,12})\.(?P<frac>\d{1,9})\] ?")
# [Sun Feb 23 16:24:18 2025] text                  (dmesg -T: local time, no zone)
_DMESG_CTIME = lazy_compile(r"^\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\] ?")
# 2025-05-27T04:18:56,089671+00:00 text            (dmesg --time-format iso)
_DMESG_ISO = lazy_compile(r"^(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}[+-]\d\d:\d\d) ")
# Feb 14 05:03:41 host kernel: text                (journalctl -k, syslog files: local time, no year)
_JOURNAL_SHORT = lazy_compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)? (?P<host>\S+) (?P<tag>[^:\s]+): ?")
# 2025-01-17T17:10:43+0000 host kernel: text       (journalctl -o short-iso[-precise])
_JOURNAL_ISO = lazy_compile(
    r"^(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[+-]\d\d:?\d\d|Z)) (?P<host>\S+) (?P<tag>[^:\s]+): ?")
# "-- Boot 1a2b... --", "-- Logs begin at ... --", "-- No entries --"
_JOURNAL_MARK = lazy_compile(r"^-- .* --$")


def _iso_at(text: str) -> float | None:
    """Unix seconds of an ISO 8601 time with its zone (``,`` or ``.`` fraction, ``+0000``)."""
    try:
        return datetime.fromisoformat(text.replace(",", ".").replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _continuation(first: str, rest: str) -> str:
    """The message with its continuation lines (indented under the first) joined by newlines."""
    lines = [first, *(line.strip() for line in rest.splitlines() if line.strip())]
    return "\n".join(lines)


def parse_dmesg_record(raw: str, seq: int, require_time: bool = True) -> LogRecord | None:
    """Parse one record of ``dmesg`` output (first line plus indented continuation lines).

    Accepted: ``[  5.140900] text``, ``dmesg -T`` (``[Sun Feb 23 16:24:18 2025] text``),
    ``dmesg --time-format iso``, with ``-x`` (``kern  :warn  : ``) or ``-r`` (``<4>``)
    level prefixes, and without any timestamp (``dmesg -t``) unless ``require_time``.

    Args:
        raw: the record's text.
        seq: its position in the file.
        require_time: refuse lines without a timestamp (format detection).

    Returns:
        The record, or ``None`` when the line does not have that shape.
    """
    first, _, rest = raw.partition("\n")
    text = first.rstrip("\r\n")
    level, facility = DEFAULT_LEVEL, 0
    if (d := _DMESG_DECODE.match(text)) is not None and d["level"] in LEVEL_NAMES:
        level = LEVEL_NAMES.index(d["level"])
        facility = 0 if d["facility"] == "kern" else 1
        text = text[d.end():]
    elif (r := _DMESG_RAW.match(text)) is not None:
        prefix = int(r["prefix"])
        level, facility = prefix & 7, prefix >> 3
        text = text[r.end():]
    ts_us: int | None = None
    wall_at = None
    if (m := _DMESG_MONO.match(text)) is not None:
        ts_us = int(m["s"]) * 1_000_000 + int(m["frac"].ljust(6, "0")[:6])
        text = text[m.end():]
    elif (c := _DMESG_CTIME.match(text)) is not None:
        text = text[c.end():]
    elif (i := _DMESG_ISO.match(text)) is not None:
        wall_at = _iso_at(i["iso"])
        text = text[i.end():]
    elif require_time:
        return None
    return LogRecord(level=level, facility=facility, seq=seq, ts_us=ts_us,
                     message=_continuation(text, rest), wall_at=wall_at)


def parse_journal_record(raw: str, seq: int) -> LogRecord | None:
    """Parse one record of ``journalctl -k`` output (``-o short``, ``short-precise``,
    ``short-iso``, ``short-iso-precise``) or a syslog file of the same shape.

    Returns:
        The record of a ``kernel:`` line (a ``[  5.14]`` stamp after the tag, as rsyslog
        writes, gives the boot-relative time); ``None`` for other programs' lines, journal
        markers (``-- Boot ... --``) and anything else.
    """
    first, _, rest = raw.partition("\n")
    text = first.rstrip("\r\n")
    m = _JOURNAL_ISO.match(text) or _JOURNAL_SHORT.match(text)
    if m is None or m["tag"] != "kernel":
        return None
    iso = m.groupdict().get("iso")
    wall_at = _iso_at(iso) if iso else None
    text = text[m.end():]
    ts_us = None
    if (mono := _DMESG_MONO.match(text)) is not None:
        ts_us = int(mono["s"]) * 1_000_000 + int(mono["frac"].ljust(6, "0")[:6])
        text = text[mono.end():]
    return LogRecord(level=DEFAULT_LEVEL, facility=0, seq=seq, ts_us=ts_us,
                     message=_continuation(text, rest), wall_at=wall_at)


def is_journal_marker(raw: str) -> bool:
    """Whether a line is one of journalctl's own (``-- Boot ... --``, ``-- No entries --``)."""
    return bool(_JOURNAL_MARK.match(raw.strip()))


def detect_log_format(first_record: str) -> TextFormat | None:
    """The format of a text log, from its first record; ``None`` when rigmon does not know it.

    Only shapes with a timestamp are recognised: a plain ``dmesg -t`` capture is plain
    text like any other file, so it needs ``kernel_log.format = "dmesg"``.
    """
    if parse_kmsg_record(first_record) is not None:
        return "kmsg"
    if parse_dmesg_record(first_record, 0) is not None:
        return "dmesg"
    line = first_record.partition("\n")[0]
    if _JOURNAL_ISO.match(line) or _JOURNAL_SHORT.match(line):
        return "journal"
    return None


def parse_log_record(raw: str, fmt: TextFormat, seq: int) -> LogRecord | None:
    """Parse one raw record in a known format; ``None`` when it is not a kernel record of it."""
    if fmt == "kmsg":
        return parse_kmsg_record(raw)
    if fmt == "dmesg":
        return parse_dmesg_record(raw, seq, require_time=False)
    return parse_journal_record(raw, seq)
