"""Pure parsers of the 12 V rail devices: line splitting, RM1 lines, PZEM-017 registers.

Free-form text lines (the ``text`` protocol) are parsed in `rigmon.collectors.psu_text`.

No I/O and no clock here: the reader in `rigmon.collectors.psu` feeds bytes and lines in.
Every parser either returns a value, returns ``None`` for a line that is not data (a
banner, debug text), or raises `LineError` with a reason; nothing else escapes, and a
line that fails any check never becomes a reading.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from rigmon.lazy_re import lazy_compile

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
        detail: what was wrong with it (``v=12030 beyond 100``).
    """

    def __init__(self, reason: LineErrorReason, detail: str) -> None:
        self.reason: LineErrorReason = reason
        self.detail = detail
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
        #: Nothing pending: no partial line buffered or being skipped, so a read that is one
        #: whole line is that line (the reader's fast path).
        self.idle = False

    @property
    def synced(self) -> bool:
        """Whether the partial line after the last restart has been passed."""
        return not self._skipping_partial

    def restart(self) -> None:
        """Forget buffered bytes and drop the next (partial) line: the port was reopened."""
        self._buf.clear()
        self._skipping_partial = True
        self._skipping_long = False
        self.idle = False

    def feed(self, data: bytes) -> list[str]:
        """Add received bytes; return the complete lines, stripped, without empty ones."""
        return [line.decode("ascii", "replace") for line in self.feed_bytes(data)]

    def feed_bytes(self, data: bytes) -> list[bytes]:
        """`feed`, with the lines as the bytes received (the reader decodes only what it must)."""
        if data and data[-1] in _LINE_END_BYTES and not (self._buf or self._skipping_partial or self._skipping_long):
            # The usual read: whole lines, nothing pending. bytes.splitlines ends lines at \r\n,
            # \n and \r only, as the piece by piece path below does.
            max_bytes = self.max_bytes
            out: list[bytes] = []
            for piece in data.splitlines():
                line = piece.strip()
                if line:
                    if len(line) > max_bytes:
                        self.long_total += 1
                    else:
                        out.append(line)
            return out
        out = []
        for piece in data.splitlines(keepends=True):
            if piece[-1] in _LINE_END_BYTES:
                self._take(piece.rstrip(b"\r\n"), ended=True, out=out)
            else:
                self._take(piece, ended=False, out=out)
        self.idle = not (self._buf or self._skipping_partial or self._skipping_long)
        return out

    def _take(self, piece: bytes, ended: bool, out: list[bytes]) -> None:
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
        out.append(line)


_LINE_END_BYTES = frozenset(b"\r\n")


#: Printable ASCII, without and with tabs (one regex match instead of a test per character).
_PRINTABLE = (lazy_compile(r"[ -~]*"), lazy_compile(r"[\t -~]*"))


def check_printable(line: str, tabs: bool = False) -> None:
    """Raise `LineError` for an over-long line or one with non-printable characters."""
    if len(line) > MAX_LINE_BYTES:
        raise LineError("long", f"{len(line)} characters")
    if _PRINTABLE[tabs].fullmatch(line) is None:
        raise LineError("control", "non-printable characters")


# ---------------------------------------------------------------------------------------
# RM1

_RM1_FRAME = lazy_compile(r"\$(RM[A-Z0-9]),([^*]*)\*([0-9A-F]{2})")
_KEY = lazy_compile(r"[a-z][a-z0-9_]*")
_INT = lazy_compile(r"-?[0-9]{1,12}")
_TRIPLE = lazy_compile(r"(-?[0-9]{1,12})/(-?[0-9]{1,12})/(-?[0-9]{1,12})")
_TEXT_VALUE = lazy_compile(r"[A-Za-z0-9._:;-]+")


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
        A window (``RM1``), an identity (``RMI``), or ``None`` for a printable line that is
        not RM1 data (banner, debug text, or a future ``$RMx`` tag).

    Raises:
        LineError: the line has non-printable bytes (any line), or starts like RM1 but is
            over-long, has a bad checksum, does not follow the format, or carries impossible
            values.
    """
    # $RM1,seq=1841,up=1843520,win=1000,n=892,v=11712/11384/11790,i=98250/96100/131400,flags=4*09
    if not line.startswith("$RM"):
        # Banners and debug text are not data; line noise is dropped before that question (the
        # protocol's recipe): bytes at the wrong baud rate, or a window whose `$` was hit, are
        # malformed lines, not a chatty device.
        check_printable(line, tabs=True)
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


_U = rb"([0-9]{1,12})"
_T = rb"(-?[0-9]{1,12})/(-?[0-9]{1,12})/(-?[0-9]{1,12})"
#: A window line as the firmware prints it: these keys in this order, current and PSU-side
#: voltage optional, flags last. One match instead of a dozen, on the bytes as read (the
#: reader parses ten a second).
_RM1_USUAL = lazy_compile(rb"\$(RM1,seq=" + _U + rb",up=" + _U + rb",win=" + _U + rb",n=" + _U + rb",v=" + _T
                          + rb"(?:,i=" + _T + rb")?(?:,vpsu=" + _T + rb")?(?:,flags=" + _U + rb")?)\*([0-9A-F]{2})(?:\r?\n)?")

#: One usual RM1 window as plain values, what `parse_rm1_usual` returns (no object per line):
#: ``(seq, up_ms, win_ms, samples, flags, v mean, v min, v max, i mean, i min, i max,
#: vpsu mean, vpsu min, vpsu max)``; volts and amperes; ``i`` and ``vpsu`` are ``None`` when
#: the line has no such channel.
UsualRm1 = tuple[int, int, int, int, int, float, float, float,
                 float | None, float | None, float | None, float | None, float | None, float | None]
#: Where each channel's mean starts in a `UsualRm1` (min and max follow it).
USUAL_VOLTS_AT = {"v": 5, "vpsu": 11}
USUAL_AMPS_AT = {"i": 8}


def parse_rm1_usual(line: bytes) -> UsualRm1 | None:
    """The values of a usual, valid RM1 window line; ``None`` otherwise.

    The reader's fast path: it accepts exactly the lines `parse_rm1_line` turns into the
    same window (`usual_window`); a line it does not accept (another shape, any check
    failing) goes through `parse_rm1_line`, which says why.

    Args:
        line: the line as received, stripped, or with its ``\\n`` or ``\\r\\n`` (then it must
            be the whole line: the reader passes a read that is exactly one line).
    """
    # $RM1,seq=1841,up=1843520,win=1000,n=892,v=11712/11384/11790,i=98250/96100/131400,vpsu=11902/11655/11960,flags=4*09
    if len(line) > MAX_LINE_BYTES:
        return None
    match = _RM1_USUAL.fullmatch(line)
    if match is None:
        return None
    (body, seq_t, up_t, win_t, n_t, vm, vl, vh, im, il, ih, pm, pl, ph, flags_t, checksum) = match.groups()
    # XOR of the body's bytes, as one integer folded in halves at byte boundaries: XOR is
    # bytewise, so seven folds of a 100-byte line give the same as a hundred steps of a loop.
    value = int.from_bytes(body, "little")
    width = len(body)
    while width > 1:
        half = (width + 1) >> 1
        value = (value & ((1 << (half << 3)) - 1)) ^ (value >> (half << 3))
        width = half
    if value != int(checksum, 16):
        return None
    seq, up_ms, win_ms, samples = int(seq_t), int(up_t), int(win_t), int(n_t)
    flags = 0 if flags_t is None else int(flags_t)
    if seq >= U32 or up_ms >= U32 or win_ms >= U32 or samples >= U32 or flags >= U32 or not samples or not win_ms:
        return None
    v_mean, v_min, v_max = int(vm) / MILLI, int(vl) / MILLI, int(vh) / MILLI
    if not v_min <= v_mean <= v_max or v_min < -MAX_ABS_VOLTS or v_max > MAX_ABS_VOLTS:
        return None
    i_mean = i_min = i_max = p_mean = p_min = p_max = None
    if im is not None:
        i_mean, i_min, i_max = int(im) / MILLI, int(il) / MILLI, int(ih) / MILLI
        if not i_min <= i_mean <= i_max or i_min < -MAX_ABS_AMPS or i_max > MAX_ABS_AMPS:
            return None
    if pm is not None:
        p_mean, p_min, p_max = int(pm) / MILLI, int(pl) / MILLI, int(ph) / MILLI
        if not p_min <= p_mean <= p_max or p_min < -MAX_ABS_VOLTS or p_max > MAX_ABS_VOLTS:
            return None
    return (seq, up_ms, win_ms, samples, flags, v_mean, v_min, v_max, i_mean, i_min, i_max, p_mean, p_min, p_max)


def usual_window(values: UsualRm1) -> RailWindow:
    """The `RailWindow` of a usual line's values (what `parse_rm1_line` returns for the line)."""
    seq, up_ms, win_ms, samples, flags, v_mean, v_min, v_max, i_mean, i_min, i_max, p_mean, p_min, p_max = values
    volts = {"v": Triple(mean=v_mean, min=v_min, max=v_max)}
    amps: dict[str, Triple] = {}
    if i_mean is not None and i_min is not None and i_max is not None:
        amps["i"] = Triple(mean=i_mean, min=i_min, max=i_max)
    if p_mean is not None and p_min is not None and p_max is not None:
        volts["vpsu"] = Triple(mean=p_mean, min=p_min, max=p_max)
    return RailWindow(seq=seq, up_ms=up_ms, win_ms=win_ms, samples=samples, flags=flags, volts=volts, amps=amps)


def _rm1_usual_window(line: str) -> RailWindow | None:
    """`parse_rm1_usual` for a decoded line (without its terminator)."""
    if not line.isascii() or line[-1:] in ("\r", "\n"):
        return None
    values = parse_rm1_usual(line.encode("ascii"))
    return None if values is None else usual_window(values)


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
