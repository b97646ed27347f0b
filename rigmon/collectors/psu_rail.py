"""Bookkeeping of the PSU rail's windows: lines into windows, envelopes, sag detection, the reading.

`RailState` is pure: fed lines or windows with the times passed in, no I/O. Its base
`rigmon.collectors.psu_device.RailDevice` keeps the device's life (connection, identity,
reboots, window sequence, counters, events). The reader thread that feeds it (exclusive open,
reopen with backoff, udev kick, pushes) is `rigmon.collectors.psu.PsuCollector`; the line
parsers are `rigmon.collectors.psu_lines`; the window arithmetic (envelopes, path-resistance
points) is `rigmon.collectors.psu_window`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rigmon.collectors.psu_device import HALF_U32, MISMATCH_LINES, RailDevice
from rigmon.collectors.psu_lines import (
    FLAG_UNDER_VOLTAGE,
    LineError,
    USUAL_AMPS_AT,
    USUAL_VOLTS_AT,
    RailWindow,
    Rm1Identity,
    Triple,
    UsualRm1,
    parse_rm1_line,
    parse_rm1_usual,
    usual_window,
)
from rigmon.collectors.psu_text import TextHeader, parse_text_line, text_window
from rigmon.collectors.psu_window import (
    POINTS_HELD,
    PathPoints,
    WindowAggregate,
    fresh_fast,
)
from rigmon.config import PsuSection
from rigmon.path_resistance import EstimatorSet
from rigmon.schema import PathResistanceReading, PsuRailReading

#: RM1 flag bit: the device lost samples or records.
FLAG_OVERRUN = 8
#: A stale reading needs at least this many missing windows.
STALE_WINDOWS = 3
#: `RailState._last_seq_win` before any window: no window length (distinct from a window without one).
_NO_WINDOW = -1


class RailState(RailDevice):
    """Bookkeeping of one rail device's windows, fed lines or windows; no I/O, times passed in.

    Thread-safety is the caller's: `PsuCollector` holds a lock around every call.

    Args:
        config: the ``[psu]`` section.
    """

    def __init__(self, config: PsuSection) -> None:
        super().__init__(config)
        self._agg = WindowAggregate()
        # Usual RM1 lines' windows since the previous reading, folded into `_agg` when one is read.
        self._fast = fresh_fast()
        # The last window, or (usual lines) its values; its `RailWindow` is built when a frame
        # needs it (`_last`), not for each of ten lines a second.
        self._last_window: RailWindow | None = None
        self._last_usual: UsualRm1 | None = None
        self._last_window_mono: float | None = None
        self._last_window_at: float | None = None
        self._header: TextHeader | None = None
        # Text lines: each channel's last value and when it came (a sketch may print one channel
        # per line), so a frame without a new line repeats every channel, not only the last line's.
        self._text_channels: dict[str, tuple[Triple, float]] = {}
        # Column names the configuration reads by: a whitespace row of words is a header
        # only when it names one of them.
        self._header_names = frozenset(src for src in config.channels.values() if not src.isdigit())
        self._pushed_min: float | None = None
        self._pushed_uv = False
        self._power_w: float | None = None
        self._energy_wh: float | None = None
        self._paths = PathPoints(config)
        # Where the configured channels sit in a usual RM1 line's values (`UsualRm1`).
        self._usual_primary = USUAL_VOLTS_AT.get(config.primary)
        self._usual_current = USUAL_AMPS_AT.get(config.current) if config.current else None
        self._usual_psu = USUAL_VOLTS_AT.get(config.psu_side) if config.psu_side else None
        self._rm1 = config.protocol == "rm1"
        self._sag_volts = config.sag_volts

    # -- connection -------------------------------------------------------------------

    def opened(self, mono: float | None = None) -> None:
        """The port was opened: the next line is partial, and a text header must come again."""
        super().opened(mono)
        self._header = None

    # -- input ------------------------------------------------------------------------

    def feed(self, data: bytes, mono: float, wall: float) -> bool:
        """Feed received bytes; return whether a sag reading should be pushed at once."""
        splitter = self.splitter
        if self._rm1 and splitter.idle and data[-1:] == b"\n":
            # The usual read: one whole line as the firmware prints it, nothing pending before it.
            values = parse_rm1_usual(data)
            if values is not None:
                return self._usual(values, mono, wall)
        partial, long = splitter.partial_total, splitter.long_total
        push = False
        for raw in splitter.feed_bytes(data):
            if self._rm1:
                values = parse_rm1_usual(raw)
                if values is not None:
                    if self._usual(values, mono, wall):
                        push = True
                    continue
            if self.line(raw.decode("ascii", "replace"), mono, wall):
                push = True
        if splitter.partial_total != partial or splitter.long_total != long:
            self._counts["partial_lines_total"] = splitter.partial_total
            self._counts["long_lines_total"] = splitter.long_total
            self._version += 1
        return push

    def line(self, line: str, mono: float, wall: float) -> bool:
        """Handle one complete line; return whether to push a sag reading now."""
        self._count(lines_total=1)
        try:
            if self.config.protocol == "rm1":
                record = parse_rm1_line(line)
                if isinstance(record, Rm1Identity):
                    self._identity(record, mono)
                    return False
                window = record
            else:
                parsed = parse_text_line(line, self._header_names)
                if isinstance(parsed, TextHeader):
                    self._header = parsed
                    window = None
                else:
                    window = None if parsed is None else text_window(
                        parsed, self._header, self.config.channels, self.config.scale)
        except LineError as exc:
            self.line_error(exc)
            self.unread(line, exc.reason, exc.detail)
            return False
        if window is None:
            self._count(ignored_lines_total=1)
            self.unread(line, None)
            return False
        return self.window(window, mono, wall)

    def window(self, window: RailWindow, mono: float, wall: float) -> bool:
        """Account one valid window; return whether to push a sag reading now."""
        if window.seq is not None:
            if not self._sequence(window.seq, window.up_ms):
                return False
        self._count(windows_total=1)
        if window.flags & FLAG_OVERRUN:
            self._count(overrun_windows_total=1)
        self._seen_window = True
        self._agg.add(window)
        self._last_window = window
        self._last_usual = None
        self._last_window_at = wall
        if self.config.protocol == "text":
            for key, triple in (*window.volts.items(), *window.amps.items()):
                self._text_channels[key] = (triple, mono)
        primary = window.volts.get(self.config.primary)
        if primary is not None:
            # Only a window that measured the primary channel keeps the rail watched: a device
            # that sends windows without samples (a loose sensor lead, ``n=0,flags=1``) or without
            # the configured channel goes stale like a silent one.
            self._last_window_mono = mono
        elif window.samples and not self.primary_said:
            self._primary_missing((*window.volts, *window.amps))
        if window.power_w is not None:
            self._power_w = window.power_w
        if window.energy_wh is not None:
            self._energy_wh = window.energy_wh
        amps = window.amps.get(self.config.current) if self.config.current else None
        if primary is not None and amps is not None:
            psu = window.volts.get(self.config.psu_side) if self.config.psu_side else None
            self._paths.add(primary.mean, amps.mean, None if psu is None else psu.mean, wall)
        return self._sag(None if primary is None else primary.min, window.flags)

    def _usual(self, values: UsualRm1, mono: float, wall: float) -> bool:
        """`line` and `window` for a usual RM1 line's values, without building its `RailWindow`.

        The reader's fast path (ten lines a second, each after a wake-up, when the caches are
        cold): the same bookkeeping as a `RailWindow` from `parse_rm1_line` gets, inline, into
        the flat accumulator `_fast`.
        """
        counts = self._counts
        counts["lines_total"] += 1
        seq, up_ms = values[0], values[1]
        last_seq, last_up = self._last_seq, self._last_up_ms
        if last_seq is not None and seq - last_seq == 1 and last_up is not None and 0 <= up_ms - last_up <= HALF_U32:
            # The next window, uptime forward: what `_sequence` finds nothing to say about.
            self._last_seq, self._last_up_ms = seq, up_ms
        elif not self._sequence(seq, up_ms):
            self._version += 1
            return False
        counts["windows_total"] += 1
        flags = values[4]
        if flags & FLAG_OVERRUN:
            counts["overrun_windows_total"] += 1
        # After the last count changed: a reader in another thread caches the record by version.
        self._version += 1
        self._seen_window = True
        self._last_usual = values
        self._last_window_at = wall
        agg = self._agg
        samples = values[3]
        agg.windows += 1
        agg.flags |= flags
        if agg.samples is not None:
            agg.samples += samples
        weight = float(samples)
        fast = self._fast
        # v, i and vpsu: where each starts in the values and in the accumulator.
        for at, into in ((5, 0), (8, 4), (11, 8)):
            mean: float | None = values[at]
            if mean is not None:
                low: float = values[at + 1]  # type: ignore[assignment]
                high: float = values[at + 2]  # type: ignore[assignment]
                fast[into] += mean * weight
                fast[into + 1] += weight
                if low < fast[into + 2]:
                    fast[into + 2] = low
                if high > fast[into + 3]:
                    fast[into + 3] = high
        primary_at = self._usual_primary
        primary_min: float | None = None
        if primary_at is not None:
            primary_mean: float | None = values[primary_at]
            primary_min = values[primary_at + 1]
            if primary_mean is not None:
                self._last_window_mono = mono
            elif not self.primary_said:
                self._primary_missing(self._usual_channels(values))
            current = self._usual_current
            amps_mean: float | None = None if current is None else values[current]
            if primary_mean is not None and amps_mean is not None:
                psu = self._usual_psu
                # `PathPoints.add`, inline.
                paths = self._paths
                points = paths.points
                points.append((primary_mean, amps_mean, None if psu is None else values[psu], wall))
                if len(points) >= POINTS_HELD:
                    paths.take()
        elif not self.primary_said:
            self._primary_missing(self._usual_channels(values))
        if (primary_min is not None and primary_min < self._sag_volts) or flags & FLAG_UNDER_VOLTAGE:
            return self._sag(primary_min, flags)
        return False

    def _primary_missing(self, channels: Sequence[str]) -> None:
        """`primary_missing` once `MISMATCH_LINES` windows came since the port opened and none had
        the primary channel (a sketch that prints one channel a line sends the others in between)."""
        if self._window_since_open():
            return
        if self._counts["windows_total"] - self._open_counts[1] >= MISMATCH_LINES:
            self.primary_missing(channels)

    @staticmethod
    def _usual_channels(values: UsualRm1) -> list[str]:
        """The channels a usual RM1 line carries."""
        at = {**USUAL_VOLTS_AT, **USUAL_AMPS_AT}
        return [name for name, index in at.items() if values[index] is not None]

    def _sag(self, primary_min: float | None, flags: int) -> bool:
        """Note a sag or a latched under-voltage alert; return whether to push a reading now."""
        sag = primary_min is not None and primary_min < self.config.sag_volts
        latched = bool(flags & FLAG_UNDER_VOLTAGE)
        if not (sag or latched):
            return False
        self._agg.sag = self._agg.sag or sag
        # Push the first sag since the previous frame, and any deeper one; not every window
        # (a device may send hundreds per second during a long brown-out).
        deeper = primary_min is not None and sag and (self._pushed_min is None or primary_min < self._pushed_min)
        first_latch = latched and not self._pushed_uv
        if deeper and primary_min is not None:
            self._pushed_min = primary_min
        self._pushed_uv = self._pushed_uv or latched
        return deeper or first_latch

    def _last_seq_win(self) -> tuple[int | None, int | None]:
        """``seq`` and ``win_ms`` of the last valid window (``None, _NO_WINDOW`` before the first)."""
        usual = self._last_usual
        if usual is not None:
            return usual[0], usual[2]
        last = self._last_window
        return (None, _NO_WINDOW) if last is None else (last.seq, last.win_ms)

    def _last(self) -> RailWindow | None:
        """The last valid window (built from a usual line's values when first asked)."""
        if self._last_usual is not None:
            self._last_window = usual_window(self._last_usual)
            self._last_usual = None
        return self._last_window

    # -- output -----------------------------------------------------------------------

    def reading(self, mono: float, reset: bool, pushed: bool = False) -> PsuRailReading:
        """The envelope since the previous frame; ``reset`` starts a new one (a frame was taken).

        A ``pushed`` reading (a sag published at once) is a frame of its own: the windows in it
        are not counted again by the next frame. Which sags have been pushed is remembered until
        the next regular frame, so a long brown-out pushes its first and deeper windows only.
        """
        agg = self._agg
        if self._fast[2] != math.inf:
            agg.fold(self._fast)
            self._fast = fresh_fast()
        windows = agg.windows
        # A port that went away reads nothing fresh, however recent its last window.
        stale = self.gone or self._stale(mono)
        last_seq, last_win_ms = self._last_seq_win()
        if windows == 0 and last_win_ms is not _NO_WINDOW and not stale and self._window_since_open():
            # The device reports slower than the agent samples: repeat the last window (never one
            # from before the port was opened again: a replugged device has said nothing yet).
            last = self._last()
            assert last is not None
            repeat = WindowAggregate()
            repeat.add(self._text_repeat(last, mono) if self._text_channels else last)
            repeat.windows = 0
            agg = repeat
        # One envelope per channel, by name; the primary and current channels' are the same records.
        volts = {k: c.volts_envelope() for k, c in sorted(agg.volts.items())} if not stale or windows else {}
        amps = {k: c.amps_envelope() for k, c in sorted(agg.amps.items())} if not stale or windows else {}
        identity = self.identity
        reading = PsuRailReading(
            port=self.config.port,
            protocol=self.config.protocol,
            connected=self.connected,
            stale=stale and self.config.primary not in agg.volts,
            envelope_source="device" if self.config.protocol == "rm1" else "host",
            windows=windows,
            volts=volts.get(self.config.primary),
            amps=amps.get(self.config.current),
            channels_volts=volts,
            channels_amps=amps,
            samples=agg.samples if volts or amps else None,
            window_s=None if last_win_ms is None or last_win_ms is _NO_WINDOW else last_win_ms / 1000.0,
            flags=agg.flags,
            under_voltage_latched=bool(agg.flags & FLAG_UNDER_VOLTAGE),
            sag=agg.sag,
            seq=last_seq,
            device_id=None if identity is None else identity.device_id,
            firmware=None if identity is None else identity.firmware,
            sensor=None if identity is None else identity.sensor,
            last_window_at=self._last_window_at,
            counters=self.counters,
            power_w=self._power_w if not stale else None,
            energy_wh_total=self._energy_wh,
        )
        if reset or pushed:
            self._agg = WindowAggregate()
        if reset and not pushed:
            self._pushed_min = None
            self._pushed_uv = False
        return reading

    def resistance(self) -> list[PathResistanceReading]:
        """Path resistance estimates (one per path the device measures)."""
        self._paths.take()
        return self._paths.estimators.readings()

    @property
    def estimators(self) -> EstimatorSet:
        """The path-resistance estimators (their daily fits are saved across agent restarts)."""
        self._paths.take()
        return self._paths.estimators

    def _text_repeat(self, last: RailWindow, mono: float) -> RailWindow:
        """The last value of every text channel that is not older than the stale limit, as one window."""
        limit = self._stale_limit()
        volts: dict[str, Triple] = {}
        amps: dict[str, Triple] = {}
        for key, (triple, at) in self._text_channels.items():
            if mono - at <= limit:
                (volts if key.startswith("v") else amps)[key] = triple
        return RailWindow(seq=None, up_ms=None, win_ms=None, samples=last.samples, flags=last.flags,
                          volts=volts, amps=amps)

    def _stale_limit(self) -> float:
        """Seconds without a reading after which the rail is stale."""
        limit = self.config.stale_after_s
        win_ms = self._last_seq_win()[1]
        if win_ms:
            limit = max(limit, STALE_WINDOWS * win_ms / 1000.0)
        if self.config.protocol == "pzem017":
            limit = max(limit, STALE_WINDOWS * self.config.poll_interval_s)
        return limit

    def _stale(self, mono: float) -> bool:
        """Whether no valid window with a reading of the primary channel came for the stale limit:
        since the last one, or since the port was (last) opened when none came since (a device
        needs its first window's time before it is silent, a replugged one too). Windows without
        samples do not count."""
        seen, opened = self._last_window_mono, self._opened_mono
        if seen is None and opened is None:
            return True
        since = max(t for t in (seen, opened) if t is not None)
        return mono - since > self._stale_limit()

    def _window_since_open(self) -> bool:
        """Whether the last valid window came after the port was last opened."""
        seen, opened = self._last_window_mono, self._opened_mono
        return seen is not None and (opened is None or seen >= opened)
