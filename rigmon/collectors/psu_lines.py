"""Pure parsers of the 12 V rail devices: line splitting, RM1 lines, PZEM-017 registers.

Free-form text lines (the ``text`` protocol) are parsed in `rigmon.collectors.psu_text`.

No I/O and no clock here: the reader in `rigmon.collectors.psu` feeds bytes and lines in.
Every parser either returns a value, returns ``None`` for a line that is not data (a
banner, debug text), or raises `LineError` with a reason; nothing else escapes, and a
line that fails any check never becomes a reading.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

#: RM1: at most 200 bytes per line including the terminator.
MAX_LINE_BYTES = 200
MILLI = 1000.0
U32 = 2**32
#: A 12 V rail monitor never reads beyond these; anything larger is line noise.
MAX_ABS_VOLTS = 100.0
MAX_ABS_AMPS = 10_000.0

LineErrorReason = Literal["long", "control", "checksum", "malformed", "nonsense"]


class LineError(ValueError):
    """A line that must be dropped, with the reason it is counted under.

    Attributes:
        reason: ``long``, ``control`` (non-printable bytes), ``checksum``, ``malformed``
            (does not follow the format) or ``nonsense`` (parses, but cannot be true).
    """

    def __init__(self, reason: LineErrorReason, detail: str) -> None:
        self.reason: LineErrorReason = reason
        super().__init__(f"{reason}: {detail}")


@dataclass(frozen=True, slots=True)
class Triple:
    """Mean, minimum and maximum of one channel over a window, in volts or amperes."""

    mean: float
    min: float
    max: float


@dataclass(frozen=True, slots=True)
class RailWindow:
    """One window of rail measurements as a device reported it.

    Attributes:
        seq: RM1 record counter (``None`` for sources without one).
        up_ms: device uptime at the end of the window, ms.
        win_ms: window length the device measured, ms.
        samples: sensor samples in the window (RM1 ``n``); 1 for a text line or a poll.
        flags: RM1 flag bits (4: under-voltage alert latched, 8: overrun).
        volts: voltage channels by key (``v``, ``vpsu``), volts.
        amps: current channels by key (``i``), amperes.
        power_w: power the meter computed itself (PZEM-017).
        energy_wh: energy counter of the meter (PZEM-017).
    """

    seq: int | None
    up_ms: int | None
    win_ms: int | None
    samples: int | None
    flags: int = 0
    volts: dict[str, Triple] = field(default_factory=dict)
    amps: dict[str, Triple] = field(default_factory=dict)
    power_w: float | None = None
    energy_wh: float | None = None


@dataclass(frozen=True, slots=True)
class Rm1Identity:
    """An RM1 ``RMI`` line: sent at boot and when asked with ``?``."""

    proto: int | None
    firmware: str | None
    device_id: str | None
    sensor: str | None
    win_ms: int | None
    channels: tuple[str, ...]


# ---------------------------------------------------------------------------------------
# Line splitting


class LineSplitter:
    """Cuts a byte stream into lines, dropping what cannot be a whole line.

    Lines end at ``\\n``, ``\\r\\n`` or a stray ``\\r``. After `restart` (a fresh open of the
    port) everything up to the first line end is dropped: it is almost always the tail of
    a line the device was printing. A line longer than ``max_bytes`` is dropped whole,
    including the rest of it that arrives later.

    Attributes:
        partial_total: first lines dropped after a restart (non-empty ones).
        long_total: over-long lines dropped.
    """

    def __init__(self, max_bytes: int = MAX_LINE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._buf = bytearray()
        self._skipping_partial = True
        self._skipping_long = False
        self.partial_total = 0
        self.long_total = 0

    @property
    def synced(self) -> bool:
        """Whether the partial line after the last restart has been passed."""
        return not self._skipping_partial

    def restart(self) -> None:
        """Forget buffered bytes and drop the next (partial) line: the port was reopened."""
        self._buf.clear()
        self._skipping_partial = True
        self._skipping_long = False

    def feed(self, data: bytes) -> list[str]:
        """Add received bytes; return the complete lines, stripped, without empty ones."""
        out: list[str] = []
        # bytes.splitlines ends lines at \r\n, \n and \r only, and keeps each piece's one end.
        for piece in data.splitlines(keepends=True):
            if piece[-1] in _LINE_END_BYTES:
                self._take(piece.rstrip(b"\r\n"), ended=True, out=out)
            else:
                self._take(piece, ended=False, out=out)
        return out

    def _take(self, piece: bytes, ended: bool, out: list[str]) -> None:
        if self._skipping_long:
            if ended:
                self._skipping_long = False
            return
        self._buf += piece
        if not ended:
            if len(self._buf) > self.max_bytes:
                self._buf.clear()
                self.long_total += 1
                self._skipping_long = True
            return
        line = bytes(self._buf).strip()
        self._buf.clear()
        if self._skipping_partial:
            self._skipping_partial = False
            if line:
                self.partial_total += 1
            return
        if not line:
            return
        if len(line) > self.max_bytes:
            self.long_total += 1
            return
        out.append(line.decode("ascii", "replace"))


_LINE_END_BYTES = frozenset(b"\r\n")


#: Printable ASCII, without and with tabs (one regex match instead of a test per character).
_PRINTABLE = (re.compile(r"[ -~]*"), re.compile(r"[\t -~]*"))


def check_printable(line: str, tabs: bool = False) -> None:
    """Raise `LineError` for an over-long line or one with non-printable characters."""
    if len(line) > MAX_LINE_BYTES:
        raise LineError("long", f"{len(line)} characters")
    if _PRINTABLE[tabs].fullmatch(line) is None:
        raise LineError("control", "non-printable characters")


# ---------------------------------------------------------------------------------------
# RM1

_RM1_FRAME = re.compile(r"\$(RM[A-Z0-9]),([^*]*)\*([0-9A-F]{2})")
_KEY = re.compile(r"[a-z][a-z0-9_]*")
_INT = re.compile(r"-?[0-9]{1,12}")
_TRIPLE = re.compile(r"(-?[0-9]{1,12})/(-?[0-9]{1,12})/(-?[0-9]{1,12})")
_TEXT_VALUE = re.compile(r"[A-Za-z0-9._:;-]+")


def rm1_checksum(body: str) -> int:
    """XOR of the bytes between ``$`` and ``*`` (as in NMEA 0183)."""
    data = body.encode("ascii")
    # The bytes as one integer, folded in halves at byte boundaries: XOR is bytewise, so
    # seven folds of a 100-byte line give the same as a hundred steps of a Python loop.
    value = int.from_bytes(data, "little")
    width = len(data)
    while width > 1:
        half = (width + 1) // 2
        value = (value & ((1 << (8 * half)) - 1)) ^ (value >> (8 * half))
        width = half
    return value


def format_rm1(body: str) -> str:
    """Frame an RM1 body (``RM1,seq=0,...``) with ``$``, ``*`` and its checksum (no line end)."""
    return f"${body}*{rm1_checksum(body):02X}"


def parse_rm1_line(line: str) -> RailWindow | Rm1Identity | None:
    """Parse one line of the RM1 protocol.

    Args:
        line: one line without its terminator.

    Returns:
        A window (``RM1``), an identity (``RMI``), or ``None`` for a line that is not RM1
        data (banner, debug text, or a future ``$RMx`` tag).

    Raises:
        LineError: the line starts like RM1 but is over-long, has non-printable bytes, a
            bad checksum, does not follow the format, or carries impossible values.
    """
    # $RM1,seq=1841,up=1843520,win=1000,n=892,v=11712/11384/11790,i=98250/96100/131400,flags=4*09
    if not line.startswith("$RM"):
        return None
    usual = _rm1_usual_window(line)
    if usual is not None:
        return usual
    return _parse_rm1_checked(line)


def _parse_rm1_checked(line: str) -> RailWindow | Rm1Identity | None:
    """`parse_rm1_line` through every check, one at a time (any RM1 line, any key order)."""
    check_printable(line)
    match = _RM1_FRAME.fullmatch(line)
    if match is None:
        raise LineError("malformed", "no $RMx,...*HH frame")
    tag, body, checksum = match.groups()
    if rm1_checksum(f"{tag},{body}") != int(checksum, 16):
        raise LineError("checksum", f"checksum {checksum} does not match")
    items = _rm1_items(body)
    if tag == "RM1":
        return _rm1_window(items)
    if tag == "RMI":
        return _rm1_identity(items)
    return None


_U = r"([0-9]{1,12})"
_T = r"(-?[0-9]{1,12})/(-?[0-9]{1,12})/(-?[0-9]{1,12})"
#: A window line as the firmware prints it: these keys in this order, current and PSU-side
#: voltage optional, flags last. One match instead of a dozen (the reader parses ten a second).
_RM1_USUAL = re.compile(rf"\$(RM1,seq={_U},up={_U},win={_U},n={_U},v={_T}(?:,i={_T})?(?:,vpsu={_T})?"
                        rf"(?:,flags={_U})?)\*([0-9A-F]{{2}})")


def _usual_triple(groups: Sequence[str | None], limit: float) -> Triple | None:
    mean, low, high = int(groups[0] or "") / MILLI, int(groups[1] or "") / MILLI, int(groups[2] or "") / MILLI
    if not low <= mean <= high or abs(low) > limit or abs(high) > limit:
        return None
    return Triple(mean=mean, min=low, max=high)


def _rm1_usual_window(line: str) -> RailWindow | None:
    """The window of a usual, valid RM1 line; ``None`` for anything else.

    Gives exactly what `_parse_rm1_checked` gives for the lines it accepts; a line it does
    not accept (another shape, or any check failing) goes through `_parse_rm1_checked`,
    which says why.
    """
    if len(line) > MAX_LINE_BYTES:
        return None
    match = _RM1_USUAL.fullmatch(line)
    if match is None:
        return None
    g = match.groups()
    if rm1_checksum(g[0]) != int(g[15], 16):
        return None
    seq, up_ms, win_ms, samples = int(g[1]), int(g[2]), int(g[3]), int(g[4])
    flags = 0 if g[14] is None else int(g[14])
    if max(seq, up_ms, win_ms, samples, flags) >= U32 or samples == 0 or win_ms == 0:
        return None
    volts: dict[str, Triple] = {}
    amps: dict[str, Triple] = {}
    for key, first, limit, into in (("v", 5, MAX_ABS_VOLTS, volts), ("i", 8, MAX_ABS_AMPS, amps),
                                     ("vpsu", 11, MAX_ABS_VOLTS, volts)):
        if g[first] is not None:
            triple = _usual_triple(g[first : first + 3], limit)
            if triple is None:
                return None
            into[key] = triple
    return RailWindow(seq=seq, up_ms=up_ms, win_ms=win_ms, samples=samples, flags=flags, volts=volts, amps=amps)


def _rm1_items(body: str) -> dict[str, str]:
    items: dict[str, str] = {}
    for item in body.split(","):
        key, sep, value = item.partition("=")
        if not sep or not _KEY.fullmatch(key) or not value:
            raise LineError("malformed", f"item {item[:20]!r} is not key=value")
        if key in items:
            raise LineError("malformed", f"key {key} repeated")
        items[key] = value
    return items


def _rm1_int(items: Mapping[str, str], key: str, required: bool) -> int | None:
    text = items.get(key)
    if text is None:
        if required:
            raise LineError("malformed", f"required key {key} missing")
        return None
    if not _INT.fullmatch(text):
        raise LineError("malformed", f"{key}={text[:20]!r} is not an integer")
    value = int(text)
    if not 0 <= value < U32:
        raise LineError("nonsense", f"{key}={value} out of range")
    return value


def _rm1_triple(key: str, text: str, limit: float) -> Triple:
    match = _TRIPLE.fullmatch(text)
    if match is None:
        raise LineError("malformed", f"{key}={text[:20]!r} is not mean/min/max")
    groups = match.groups()
    mean, low, high = int(groups[0]) / MILLI, int(groups[1]) / MILLI, int(groups[2]) / MILLI
    if not low <= mean <= high:
        raise LineError("nonsense", f"{key}: not min <= mean <= max")
    if abs(low) > limit or abs(high) > limit:
        raise LineError("nonsense", f"{key}: beyond {limit:g}")
    return Triple(mean=mean, min=low, max=high)


def _rm1_window(items: Mapping[str, str]) -> RailWindow:
    seq = _rm1_int(items, "seq", required=True)
    up_ms = _rm1_int(items, "up", required=True)
    win_ms = _rm1_int(items, "win", required=True)
    samples = _rm1_int(items, "n", required=True)
    flags = _rm1_int(items, "flags", required=False) or 0
    volts: dict[str, Triple] = {}
    amps: dict[str, Triple] = {}
    for key, value in items.items():
        # In RM1 any key starting with v is a millivolt triple, with i a milliamp triple.
        if key.startswith("v"):
            volts[key] = _rm1_triple(key, value, MAX_ABS_VOLTS)
        elif key.startswith("i"):
            amps[key] = _rm1_triple(key, value, MAX_ABS_AMPS)
    if samples == 0 and (volts or amps):
        raise LineError("nonsense", "values in a window without samples")
    if samples and not volts:
        raise LineError("malformed", "a window with samples and no voltage")
    if win_ms == 0 and samples:
        raise LineError("nonsense", "samples in a window of 0 ms")
    return RailWindow(seq=seq, up_ms=up_ms, win_ms=win_ms, samples=samples, flags=flags, volts=volts, amps=amps)


def _rm1_identity(items: Mapping[str, str]) -> Rm1Identity:
    for key, value in items.items():
        if not _TEXT_VALUE.fullmatch(value):
            raise LineError("malformed", f"{key}: bad characters")
    proto = items.get("proto")
    win = items.get("win")
    if proto is not None and not proto.isdigit():
        raise LineError("malformed", "proto is not a number")
    if win is not None and not win.isdigit():
        raise LineError("malformed", "win is not a number")
    channels = tuple(c for c in items.get("ch", "").split(";") if c)
    return Rm1Identity(
        proto=None if proto is None else int(proto[:9]),
        firmware=items.get("fw"),
        device_id=items.get("id"),
        sensor=items.get("sensor"),
        win_ms=None if win is None else int(win[:9]),
        channels=channels,
    )


# ---------------------------------------------------------------------------------------
# PZEM-017 (Modbus RTU input registers 0x0000..0x0007)

PZEM_REGISTER_COUNT = 8
PZEM_ALARM_ON = 0xFFFF
#: RM1 flag bit for "under-voltage alert latched", reused for the PZEM low-voltage alarm.
FLAG_UNDER_VOLTAGE = 4


def parse_pzem017_registers(registers: Sequence[int]) -> RailWindow:
    """Decode the eight input registers of a PZEM-017/003 into a one-sample window.

    Register map: 0 voltage 0.01 V, 1 current 0.01 A, 2/3 power 0.1 W (low word first),
    4/5 energy 1 Wh (low word first), 6 high-voltage alarm, 7 low-voltage alarm
    (0xFFFF = alarm).

    Raises:
        LineError: not eight 16-bit registers, or an alarm register that is neither 0 nor
            0xFFFF.
    """
    # 01 04 10 05 40 00 0A 00 0D 00 00 00 02 00 00 00 00 00 00 D6 29 -> 13.44 V, 0.10 A, 1.3 W, 2 Wh
    if len(registers) != PZEM_REGISTER_COUNT:
        raise LineError("malformed", f"{len(registers)} registers, expected {PZEM_REGISTER_COUNT}")
    if any(not 0 <= r <= 0xFFFF for r in registers):
        raise LineError("malformed", "register value beyond 16 bits")
    if registers[6] not in (0, PZEM_ALARM_ON) or registers[7] not in (0, PZEM_ALARM_ON):
        raise LineError("nonsense", "alarm registers neither 0 nor 0xFFFF")
    volts = registers[0] / 100.0
    amps = registers[1] / 100.0
    power_w = (registers[2] | registers[3] << 16) / 10.0
    energy_wh = float(registers[4] | registers[5] << 16)
    flags = FLAG_UNDER_VOLTAGE if registers[7] == PZEM_ALARM_ON else 0
    return RailWindow(
        seq=None, up_ms=None, win_ms=None, samples=1, flags=flags,
        volts={"v": Triple(volts, volts, volts)}, amps={"i": Triple(amps, amps, amps)},
        power_w=power_w, energy_wh=energy_wh,
    )
