"""The rail device's life as its lines tell it: connection, identity, reboots, window sequence, counters, events.

`RailDevice` is pure (times passed in, no I/O) and the base of `rigmon.collectors.psu_rail.RailState`,
which accounts the windows themselves (envelopes, sags, path-resistance points, the reading).
"""

from __future__ import annotations

from collections.abc import Iterable

from rigmon.collectors.base import EventDraft
from rigmon.collectors.psu_lines import U32, LineError, LineSplitter, Rm1Identity
from rigmon.config import PsuSection
from rigmon.schema import PsuAdcCounters

HALF_U32 = U32 // 2
#: Lines since the port opened, none of them a window, after which the device is said not to speak
#: the configured protocol (more than a boot banner; an RM1 device at 1 s windows: thirty seconds).
MISMATCH_LINES = 30
#: Characters of a line quoted in the mismatch event.
QUOTED_CHARS = 60


class RailDevice:
    """What one rail device did: opened and lost, who it is, when it rebooted, which windows came
    in order, twice or not at all, and the counters and events that say so.

    Thread-safety is the caller's: `PsuCollector` holds a lock around every call.

    Args:
        config: the ``[psu]`` section.
    """

    def __init__(self, config: PsuSection) -> None:
        self.config = config
        # Counted in a plain dict (a line is counted two or three times; building a frozen record
        # each time was a fifth of a line's cost) and turned into the record when one is read.
        # Readers in other threads (tests, snapshots) read `counters` without the collector's lock:
        # the record is cached with the version of the counts it was built from, never stale.
        self._counts = {name: 0 for name in PsuAdcCounters.__struct_fields__}
        self._version = 0
        self._counters: tuple[int, PsuAdcCounters] | None = None
        self.events: list[EventDraft] = []
        self.connected = False
        self.last_error: str | None = None
        self.identity: Rm1Identity | None = None
        self.splitter = LineSplitter()
        self._last_seq: int | None = None
        self._last_up_ms: int | None = None
        self._seen_window = False
        self._query_mono: float | None = None
        self._ever_opened = False
        #: When the port was last opened (monotonic seconds), if the caller said.
        self._opened_mono: float | None = None
        # Lines and windows counted when the port was last opened, and whether this open's lines
        # were said not to be the configured protocol (`_unread`).
        self._open_counts: tuple[int, int] = (0, 0)
        self._mismatch_said = False
        #: This open's windows were said to lack the primary channel (`primary_missing`).
        self.primary_said = False

    # -- connection -------------------------------------------------------------------

    def opened(self, mono: float | None = None) -> None:
        """The port was opened (at ``mono``, monotonic seconds): the next line is partial."""
        self.connected = True
        self._opened_mono = mono
        self.last_error = None
        self.splitter.restart()
        self._count(opens_total=1)
        self._open_counts = (self._counts["lines_total"], self._counts["windows_total"])
        self._mismatch_said = False
        self.primary_said = False
        if self._ever_opened:
            self._event("psu_adc_reconnected", "info", f"rail ADC on {self.config.port} (psu.port) is back")
        self._ever_opened = True

    def closed(self, reason: str) -> None:
        """The port went away (unplugged, reset) or could not be opened."""
        if self.connected:
            self._count(disconnects_total=1)
            # The reason names the port when the port said it (``/dev/rigmon-psu0: Input/output error``).
            where = "" if self.config.port in reason else f" on {self.config.port}"
            self._event("psu_adc_disconnected", "warning",
                        f"rail ADC{where} (psu.port) went away: {reason}", {"reason": reason})
        self.connected = False
        self.last_error = reason

    @property
    def gone(self) -> bool:
        """Whether the port was open and is no longer (unplugged, reset): not one not found yet."""
        return self._ever_opened and not self.connected

    def query_sent(self, mono: float) -> None:
        """We asked an RM1 device for its identity (``?``)."""
        self._query_mono = mono

    # -- what lines say about the device ---------------------------------------------

    def line_error(self, exc: LineError) -> None:
        """Count a dropped line (or a bad PZEM-017 answer) by its reason."""
        key = {
            "long": "long_lines_total", "control": "malformed_lines_total", "checksum": "checksum_errors_total",
            "malformed": "malformed_lines_total", "nonsense": "nonsense_lines_total",
        }[exc.reason]
        self._count(**{key: 1})

    def unread(self, line: str, reason: str | None, detail: str | None = None) -> None:
        """A line that gave no window (``reason``: why it was dropped, ``detail`` what it held; ``None``:
        not data). Once an open's lines are all such, say what the device seems to speak instead, once per open.

        Only lines that are not readings come here, never the usual RM1 window: no cost per reading.
        """
        if self._mismatch_said:
            return
        lines_at_open, windows_at_open = self._open_counts
        if self._counts["windows_total"] != windows_at_open:
            self._mismatch_said = True  # this open reads windows: the protocol is right
            return
        protocol = self.config.protocol
        rm1_line = line.startswith(("$RM1,", "$RMI,"))
        if not (protocol == "text" and rm1_line) and self._counts["lines_total"] - lines_at_open < MISMATCH_LINES:
            return
        self._mismatch_said = True
        lines = self._counts["lines_total"] - lines_at_open
        if protocol == "text" and rm1_line:
            advice = 'it speaks RM1: set psu.protocol = "rm1"'
        elif reason == "control":
            advice = (f"only line noise: another line speed than psu.baud ({self.config.line_baud})? "
                      "Or a device that sends binary frames")
        elif protocol == "text" and reason == "nonsense":
            # The lines carry the channel, in other units: a sketch printing mV read 12030 V. Saying
            # "no line carries a channel" sent the operator to [psu.channels], which was right.
            advice = (f"its lines carry the channels, but no rail reads that ({detail}): a sketch printing "
                      f"mV or mA needs [psu.scale] (v = 0.001)")
        elif protocol == "text" and reason == "malformed" and detail:
            advice = f"its lines carry the channels, but cannot be read so ({detail})"
        elif protocol == "rm1":
            advice = ('text lines, no RM1 window: set psu.protocol = "text" with [psu.channels], '
                      "or check the firmware")
        else:
            advice = "no line carries a channel [psu.channels] reads"
        quoted = "".join(c if " " <= c <= "~" else "?" for c in line[:QUOTED_CHARS])
        self._event("psu_adc_protocol_mismatch", "warning",
                    f"rail ADC on {self.config.port} does not speak psu.protocol = \"{protocol}\" "
                    f"({lines} line{'s' if lines != 1 else ''} since the port opened, none a reading; "
                    f"the last: {quoted!r}): {advice}",
                    {"protocol": protocol, "line": quoted})

    def primary_missing(self, channels: Iterable[str]) -> None:
        """Windows with samples come without the ``psu.primary`` channel: say so once per open.

        Such windows are counted, but the rail is not watched and goes stale, which alone reads as
        a silent device. Only called for such windows: no cost for a window with the channel.
        """
        if self.primary_said:
            return
        self.primary_said = True
        primary = self.config.primary
        names = ", ".join(sorted(channels)) or "none"
        advice = (f"map the load-side voltage to {primary} in [psu.channels]" if self.config.protocol == "text"
                  else "set psu.primary to its load-side voltage channel")
        self._event("psu_adc_channel_missing", "warning",
                    f"rail ADC on {self.config.port} sends windows without psu.primary = \"{primary}\" "
                    f"(its channels: {names}): the rail is not watched; {advice}",
                    {"channel": primary, "channels": names})

    def read_error(self) -> None:
        """A poll got no valid answer."""
        self._count(read_errors_total=1)

    def _identity(self, identity: Rm1Identity, mono: float) -> None:
        # The first ``RMI`` line after we sent ``?`` is the answer, however late: lines already on
        # their way come first, and under the simulator's accelerated clock a few real
        # milliseconds are seconds. A device that rebooted instead of answering starts its
        # window sequence again, which `_sequence` reports.
        answered = self._query_mono is not None
        if not answered and self._seen_window:
            self._reboot(f"identity line from {identity.device_id or 'the device'}")
        elif self.identity is not None and identity.device_id != self.identity.device_id:
            self._event("psu_adc_replaced", "info",
                        f"rail ADC is now {identity.device_id} (was {self.identity.device_id})",
                        {"device_id": identity.device_id, "previous": self.identity.device_id})
            # Another device counts its own windows: its seq says nothing about lost ones, nor
            # about a reboot, against the previous device's.
            self._last_seq = None
            self._last_up_ms = None
        self.identity = identity
        self._query_mono = None

    def _reboot(self, why: str) -> None:
        self._count(reboots_total=1)
        self._event("psu_adc_rebooted", "warning", f"rail ADC rebooted ({why})", {"why": why})
        self._last_seq = None
        self._last_up_ms = None

    def _sequence(self, seq: int, up_ms: int | None) -> bool:
        """Track seq and uptime; return False for a duplicate window (dropped)."""
        last_seq = self._last_seq
        if last_seq is not None:
            delta = (seq - last_seq) % U32
            up_back = (
                up_ms is not None and self._last_up_ms is not None
                and (up_ms - self._last_up_ms) % U32 > U32 // 2
            )
            if delta == 0 and not up_back:
                self._count(nonsense_lines_total=1)
                return False
            if delta > U32 // 2 or up_back:
                self._reboot(f"seq {last_seq} -> {seq}")
            elif delta > 1:
                self._count(lost_windows_total=delta - 1)
        self._last_seq = seq
        self._last_up_ms = up_ms
        return True

    # -- counters and events ----------------------------------------------------------

    def take_events(self) -> list[EventDraft]:
        """Events since the last call."""
        events, self.events = self.events, []
        return events

    @property
    def counters(self) -> PsuAdcCounters:
        """The counters so far."""
        version, cached = self._version, self._counters
        if cached is not None and cached[0] == version:
            return cached[1]
        record = PsuAdcCounters(**self._counts)
        self._counters = (version, record)
        return record

    def _count(self, **increments: int) -> None:
        for key, step in increments.items():
            self._counts[key] += step
        self._version += 1

    def _event(self, kind: str, severity: str, message: str,
               data: dict[str, str | int | float | bool | None] | None = None) -> None:
        self.events.append(EventDraft(kind=kind, severity=severity, subject="psu:adc", message=message, data=data))
