"""PSU rail collector: a serial ADC or meter read by a dedicated thread, envelopes that keep every sag.

The parsers live in `rigmon.collectors.psu_lines` (RM1, text, PZEM-017), `RailState` (pure
bookkeeping: sequence tracking, counters, the min/mean/max aggregate since the previous
frame, sag detection, events) in `rigmon.collectors.psu_rail`. This module holds
`PsuCollector` (the reader thread: exclusive open, reopen with backoff, udev kick, pushes).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from rigmon.clock import Clock, SystemClock
from rigmon.collectors.base import (
    CollectorContext,
    CollectorError,
    EventDraft,
    NoData,
    PushFn,
)
from rigmon.collectors.psu_lines import (
    PZEM_REGISTER_COUNT,
    LineError,
    RailWindow,
    parse_pzem017_registers,
)
from rigmon.collectors.psu_rail import (
    FLAG_OVERRUN,
    STALE_WINDOWS,
    RailState,
)
from rigmon.config import PsuSection
from rigmon.hw.modbus import (
    InputRegisters,
    ModbusPortBusy,
    ModbusPortError,
    ModbusReadError,
    open_modbus,
)
from rigmon.hw.root import HostRoot
from rigmon.hw.serialport import (
    READ_TIMEOUT_S,
    SerialPort,
    SerialPortBusy,
    SerialPortError,
    cancel_serial_read,
    open_serial,
    pump_serial,
)
from rigmon.hw.tty_udev import TtyWatch, UdevTtyWatch
from rigmon.path_resistance import EstimatorState
from rigmon.schema import PsuRailReading

# Public names, the rail state's included: they lived in this module and stay importable from it.
__all__ = [
    "FIRST_OPEN_WAIT_S",
    "FLAG_OVERRUN",
    "MODBUS_FAILURES_BEFORE_REOPEN",
    "READ_CHUNK_BYTES",
    "STALE_WINDOWS",
    "ModbusOpener",
    "PortOpener",
    "PsuCollector",
    "RailState",
    "make_psu_collector",
]

log = logging.getLogger(__name__)

#: Consecutive failed Modbus polls after which the port is reopened.
MODBUS_FAILURES_BEFORE_REOPEN = 5
READ_CHUNK_BYTES = 4096
#: Longest a first collect() waits for the reader's first open attempt.
FIRST_OPEN_WAIT_S = 1.0
#: A serial reader that has not come back from the port for this long (its reads wait `READ_TIMEOUT_S`
#: at most) has not run: its read hangs in the driver, or the whole agent was stopped (see `_judged_at`).
READER_LAG_S = 2 * READ_TIMEOUT_S

PortOpener = Callable[[str, int], SerialPort]
ModbusOpener = Callable[[str, int, int], InputRegisters]


class PsuCollector:
    """The rail ADC or meter configured in ``[psu]``, read by its own thread.

    Args:
        config: the ``[psu]`` section; an empty ``port`` makes the collector absent.
        root: the port path is resolved below the agent's root (``/`` on a node).
        clock: monotonic time for staleness, wall time for the resistance trend.
        open_port: opens a serial port (RM1 and text protocols).
        open_modbus_device: opens a Modbus RTU slave (PZEM-017).
        tty_watch: udev tty add events that cut the reopen backoff short, or ``None``.
    """

    name = "psu"

    def __init__(
        self,
        config: PsuSection,
        root: HostRoot,
        clock: Clock,
        open_port: PortOpener = open_serial,
        open_modbus_device: ModbusOpener = open_modbus,
        tty_watch: TtyWatch | None = None,
    ) -> None:
        self.config = config
        self.root = root
        self.clock = clock
        self._open_port = open_port
        self._open_modbus = open_modbus_device
        self._tty_watch = tty_watch
        self._state = RailState(config)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        # `_stop` as a plain attribute, for the reader's check after every chunk.
        self._stopping = False
        #: The last open failed because another process holds the port (`rigmon check` beside a running agent).
        self.port_busy = False
        self._kick = threading.Event()
        self._first_attempt = threading.Event()
        self._thread: threading.Thread | None = None
        #: The serial port being read, for `close` to end a waiting read.
        self._port: SerialPort | None = None
        self._push: PushFn | None = None
        # The system clock's monotonic is `time.monotonic` itself: no Python call per line.
        self._monotonic = time.monotonic if type(clock) is SystemClock else clock.monotonic
        # Wall time of a line is its monotonic time plus this offset, refreshed with every
        # frame and every open (one clock read per line, not two): a step of the wall clock
        # reaches the lines' times within a second.
        self._wall_offset_s = clock.time() - clock.monotonic()
        #: Monotonic time the reader last came back from the port (a plain attribute: one writer).
        self._looked_at: float | None = None
        #: Monotonic time of the previous frame's reading (`collect`).
        self._collected_at: float | None = None
        # The Modbus reader looks once a poll interval: longer than that is a lag.
        self._reader_lag_s = (max(READER_LAG_S, 2 * config.poll_interval_s) if config.protocol == "pzem017"
                              else READER_LAG_S)

    @property
    def state(self) -> RailState:
        """The bookkeeping (tests read counters from it; hold no reference across threads)."""
        return self._state

    def export_path_state(self) -> tuple[EstimatorState, ...]:
        """Daily fits of the path-resistance estimators (`PathStateHolder`)."""
        with self._lock:
            return self._state.estimators.export_state()

    def restore_path_state(self, states: Sequence[EstimatorState]) -> int:
        """Take over saved daily fits; a path applies when its first point arrives (`PathStateHolder`)."""
        with self._lock:
            return self._state.estimators.restore_state(states)

    def start(self, push: PushFn) -> None:
        """Start the reader thread (nothing when no port is configured)."""
        if not self.config.port or self._thread is not None:
            return
        self._push = push
        if self._tty_watch is not None:
            self._tty_watch.start(lambda _node: self.kick())
        target = self._run_modbus if self.config.protocol == "pzem017" else self._run_serial
        self._thread = threading.Thread(target=target, name="rigmon-psu-reader", daemon=True)
        self._thread.start()

    def kick(self) -> None:
        """Retry opening the port now (a tty was added)."""
        self._kick.set()

    def collect(self) -> Sequence[object]:
        if not self.config.port:
            raise NoData("no serial port configured (psu.port is empty)")
        if self._thread is None:
            raise CollectorError("reader not started")
        self._first_attempt.wait(FIRST_OPEN_WAIT_S)
        with self._lock:
            self._wall_offset_s = self.clock.time() - self.clock.monotonic()
            if not self._state.connected:
                reason = self._state.last_error or "not open yet"
                # A port that was open and went away still has a rail to report: ``connected`` false,
                # stale, with the windows that came before it went and the counters as they stand.
                gone = [self._state.reading(self.clock.monotonic(), reset=True)] if self._state.gone else []
                raise CollectorError(f"{self._where(reason)}: {reason}; retrying", records=gone)
            records: list[object] = [self._state.reading(self._judged_at(self.clock.monotonic()), reset=True)]
            records.extend(self._state.resistance())
        return records

    def _judged_at(self, mono: float) -> float:
        """The time the rail's staleness is judged as of: now, or the reader's last look at the port
        when the agent did not run since the previous frame and the reader has not caught up yet.

        Stopped (SIGSTOP, ^Z) or its VM paused, the agent reads nothing while the ADC's lines wait
        in the port; judged on resuming before the reader has read them, the rail was called
        silent for the stop (``psu_adc_silent`` went pending). A stop is when neither the reader
        nor the frames ran: the reader lags by about the time since the previous frame. A read
        hung in the driver lags on while the frames come on time, and is judged as of now again
        within a frame's interval and `READER_LAG_S`.
        """
        looked_at, collected_at = self._looked_at, self._collected_at
        self._collected_at = mono
        if looked_at is None or collected_at is None:
            return mono
        lag_s = mono - looked_at
        if lag_s > self._reader_lag_s and mono - collected_at + self._reader_lag_s >= lag_s:
            return looked_at
        return mono

    def close(self) -> None:
        """Stop the reader and release the port."""
        self._stopping = True
        self._stop.set()
        self._kick.set()
        port = self._port
        if port is not None:
            # The reads wait up to a second while the device is silent.
            cancel_serial_read(port)
        if self._tty_watch is not None:
            self._tty_watch.stop()
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    # -- reader threads ---------------------------------------------------------------

    def _port_path(self) -> str:
        return str(self.root.path(self.config.port))

    def _backoff(self, delay_s: float) -> float:
        """Wait before the next open attempt (cut short by a udev kick); return the next delay."""
        self._kick.wait(delay_s)
        self._kick.clear()
        return min(delay_s * 2, self.config.reopen_max_s)

    def _run_serial(self) -> None:
        delay_s = self.config.reopen_min_s
        while not self._stop.is_set():
            try:
                port = self._open_port(self._port_path(), self.config.line_baud)
            except SerialPortError as exc:
                self.port_busy = isinstance(exc, SerialPortBusy)
                self._closed(str(exc))
                self._first_attempt.set()
                delay_s = self._backoff(delay_s)
                continue
            delay_s = self.config.reopen_min_s
            self.port_busy = False
            # Set before every look at `_stop` below: a `close` after that look ends the read.
            self._port = port
            try:
                # Discard what was buffered before the open, and only then report the port
                # open: the device may send as soon as it is reported back (a real ADC at
                # once, a test the moment it sees `connected`), and a reset after the
                # report would drop those lines.
                port.reset_input()
                self._wall_offset_s = self.clock.time() - self.clock.monotonic()
                self._update(lambda state: state.opened(self.clock.monotonic()))
                self._looked_at = self.clock.monotonic()
                self._first_attempt.set()
                # Ask for the identity once the partial first line is behind us, so the
                # answer is not dropped with it.
                query = self.config.query_identity and self.config.protocol == "rm1"
                while query and not self._stop.is_set():
                    self._take(port.read(READ_CHUNK_BYTES))
                    if self._state.splitter.synced:
                        query = False
                        with self._lock:
                            self._state.query_sent(self.clock.monotonic())
                        port.write(b"?\n")
                if not self._stop.is_set():
                    pump_serial(port, self._take, READ_CHUNK_BYTES)
            except SerialPortError as exc:
                self._closed(str(exc))
                self._first_attempt.set()  # also when the reset failed, before `opened`
            finally:
                self._port = None
                port.close()
            if not self._stop.is_set():
                delay_s = self._backoff(delay_s)
        self._closed("agent stopping", publish=False)

    def _run_modbus(self) -> None:
        delay_s = self.config.reopen_min_s
        while not self._stop.is_set():
            try:
                device = self._open_modbus(self._port_path(), self.config.line_baud, self.config.pzem_address)
            except ModbusPortError as exc:
                self.port_busy = isinstance(exc, ModbusPortBusy)
                self._closed(str(exc))
                self._first_attempt.set()
                delay_s = self._backoff(delay_s)
                continue
            delay_s = self.config.reopen_min_s
            self.port_busy = False
            failures = 0
            said: set[str] = set()
            try:
                self._update(lambda state: state.opened(self.clock.monotonic()))
                self._looked_at = self.clock.monotonic()
                self._first_attempt.set()
                while not self._stop.is_set():
                    try:
                        window = parse_pzem017_registers(device.read_input_registers(0, PZEM_REGISTER_COUNT))
                    except (ModbusReadError, LineError) as exc:
                        kind = exc.kind if isinstance(exc, ModbusReadError) else str(exc)
                        if kind not in said:
                            said.add(kind)
                            self._poll_failed(exc, failures)
                        failures += 1
                        with self._lock:
                            if isinstance(exc, LineError):
                                self._state.line_error(exc)
                            else:
                                self._state.read_error()
                        if failures >= MODBUS_FAILURES_BEFORE_REOPEN and not self.root.path(self.config.port).exists():
                            raise ModbusPortError(f"{self.config.port} is gone") from None
                    else:
                        if failures:
                            self._poll_answered(failures)
                        failures = 0
                        said.clear()
                        self._window(window)
                    self._looked_at = self.clock.monotonic()
                    self._stop.wait(self.config.poll_interval_s)
            except ModbusPortError as exc:
                self._closed(str(exc))
            finally:
                device.close()
            if not self._stop.is_set():
                delay_s = self._backoff(delay_s)
        self._closed("agent stopping", publish=False)

    def _poll_failed(self, exc: Exception, failures: int) -> None:
        """Log a failed poll that fails anew: the first of a run, or the first of each other kind in it.

        With what the library saw (pymodbus's own log lines are in ``exc``, not in the log); the
        counters count the rest.
        """
        run = f" (after {failures} failed polls)" if failures else ""
        log.warning("%s: the PZEM-017 at address %d (psu.pzem_address) gave no valid answer%s: %s; "
                    "polling on, counted in psu_rail.counters", self._where(), self.config.pzem_address, run, exc)

    def _poll_answered(self, failures: int) -> None:
        """Log that the meter answers again, after a run of failed polls."""
        log.info("%s: the PZEM-017 at address %d answers again after %d failed polls",
                 self._where(), self.config.pzem_address, failures)

    def _where(self, reason: str = "") -> str:
        """The configured port and its config key, for messages (once, when ``reason`` names it already)."""
        return "psu.port" if self.config.port in reason else f"psu.port {self.config.port}"

    def _take(self, data: bytes) -> bool:
        """Feed a chunk read from the port (``b""``: the read timed out); return whether to read on."""
        mono = self._looked_at = self._monotonic()
        if data:
            with self._lock:
                state = self._state
                if state.feed(data, mono, mono + self._wall_offset_s):
                    sag: PsuRailReading | None = state.reading(mono, reset=True, pushed=True)
                    events = state.take_events()
                elif state.events:
                    sag = None
                    events = state.take_events()
                else:
                    return not self._stopping
            self._publish(sag, events)
        return not self._stopping

    def _window(self, window: RailWindow) -> None:
        with self._lock:
            push = self._state.window(window, self.clock.monotonic(), self.clock.time())
            sag = self._state.reading(self.clock.monotonic(), reset=True, pushed=True) if push else None
            events = self._state.take_events()
        self._publish(sag, events)

    def _closed(self, reason: str, publish: bool = True) -> None:
        with self._lock:
            self._state.closed(reason)
            events = self._state.take_events()
        if publish:
            self._publish(None, events)

    def _update(self, change: Callable[[RailState], None], publish: bool = True) -> None:
        with self._lock:
            change(self._state)
            events = self._state.take_events()
        if publish:
            self._publish(None, events)

    def _publish(self, sag: PsuRailReading | None, events: list[EventDraft]) -> None:
        records: list[object] = list(events)
        if sag is not None:
            records.append(sag)
        if records and self._push is not None:
            self._push(records)


def make_psu_collector(ctx: CollectorContext) -> PsuCollector:
    """Registry factory: the ``[psu]`` section's device, with udev tty events when available."""
    config = ctx.config.psu
    return PsuCollector(config, ctx.root, ctx.clock, tty_watch=UdevTtyWatch() if config.port else None)
