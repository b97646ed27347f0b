"""Modbus RTU over a serial port (PZEM-017 DC meters), through pymodbus: framing and CRC are the library's."""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from rigmon.hw.serialport import hold_exclusively, open_failure, release_exclusive
from rigmon.lazy_re import lazy_compile

log = logging.getLogger(__name__)

#: PZEM-017: 9600 baud, 8 data bits, no parity, 2 stop bits (manual; Tasmota opens it 8N2).
PZEM_STOPBITS = 2
#: The logger every pymodbus message goes through (`pymodbus.logging.Log`).
PYMODBUS_LOGGER = "pymodbus.logging"
#: Longest library note kept in an error (a frame dump of a chatty line is kilobytes).
NOTE_MAX_CHARS = 240
#: pymodbus 3.x: "Cleanup recv buffer before send: 0x24 0x52 0x4d ..." (bytes nobody asked for).
_UNSOLICITED = lazy_compile(r"Cleanup recv buffer before send: ((?:0x[0-9a-fA-F]{1,2} ?)+)")


class ModbusPortError(Exception):
    """The port cannot be opened or went away."""


class ModbusPortBusy(ModbusPortError):
    """Another process holds the port's exclusive lock: a running rigmon agent, or a terminal program."""


class ModbusReadError(Exception):
    """The device did not answer, or answered with an error or a bad frame (the message says
    what pymodbus saw, its log lines included).

    Attributes:
        kind: the message without what changes from poll to poll (the bytes seen), so that a
            caller can say a run of failures once and a new kind of failure again.
    """

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = message if kind is None else kind


class LibraryNotes(logging.Filter):
    """pymodbus's log lines made in this thread while rigmon calls it, taken out of the log.

    pymodbus logs why a call failed (an ERROR line, then a frame dump; a WARNING for bytes that
    waited on the line) and then raises or returns False; rigmon says the same with the port and
    the config key, so the library's line would be a duplicate, once a poll. Lines made during
    one of our calls (`capture`) become part of that call's error; lines made outside one (no
    rigmon call: a library thread) pass to the log as before.
    """

    def __init__(self) -> None:
        super().__init__()
        self._local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        notes: list[str] | None = getattr(self._local, "notes", None)
        if notes is None:
            return True
        notes.append(record.getMessage())
        return False

    @contextmanager
    def capture(self) -> Iterator[list[str]]:
        """Collect this thread's pymodbus log lines until the block ends."""
        notes: list[str] = []
        self._local.notes = notes
        try:
            yield notes
        finally:
            self._local.notes = None


_notes_lock = threading.Lock()
_notes: LibraryNotes | None = None


def library_notes() -> LibraryNotes:
    """The filter on pymodbus's logger, installed on first use."""
    global _notes
    with _notes_lock:
        if _notes is None:
            _notes = LibraryNotes()
            logging.getLogger(PYMODBUS_LOGGER).addFilter(_notes)
        return _notes


def notes_text(notes: list[str], said: str = "", data_shown: bool = True) -> str:
    """pymodbus's log lines as one line for an error, without what ``said`` already says.

    Its "Repeating...." stand-in for a repeated line is dropped; bytes that waited on the line
    are shown as text (an ASCII device on a Modbus port is a wiring or config mistake), or only
    said to be there when not ``data_shown``.
    """
    parts: list[str] = []
    for note in notes:
        for piece in note.split("\n"):
            piece = piece.strip().removeprefix(">>>>>").strip()
            if not piece or piece == "Repeating...." or piece in said:
                continue
            match = _UNSOLICITED.fullmatch(piece)
            if match is not None:
                data = bytes(int(b, 16) for b in match.group(1).split())
                piece = "bytes nobody asked for were waiting on the line"
                if data_shown:
                    piece = f"{len(data)} {piece}: {data[:80]!r}"
            parts.append(piece[:NOTE_MAX_CHARS])
    return "; ".join(parts)


def _with_notes(text: str, notes: list[str]) -> str:
    extra = notes_text(notes, text)
    return f"{text} ({extra})" if extra else text


def _read_error(text: str, notes: list[str]) -> ModbusReadError:
    kind = notes_text(notes, text, data_shown=False)
    return ModbusReadError(_with_notes(text, notes), f"{text} ({kind})" if kind else text)


class InputRegisters(Protocol):
    """A Modbus device whose input registers (function 0x04) can be read."""

    def read_input_registers(self, address: int, count: int) -> list[int]:
        """Read ``count`` registers from ``address``.

        Raises:
            ModbusReadError: no valid answer.
            ModbusPortError: the port is gone.
        """
        ...

    def close(self) -> None:
        """Release the port."""
        ...


class PymodbusDevice:
    """One slave on a serial Modbus RTU line (pymodbus opens the port exclusively).

    Args:
        path: serial device.
        baud: line speed (9600 for a PZEM-017).
        slave: Modbus address (1..247).
        timeout_s: how long to wait for an answer.
    """

    def __init__(self, path: str, baud: int, slave: int, timeout_s: float = 1.0) -> None:
        # Imported here: pymodbus costs ~12 ms at start-up and only a PZEM-017 line needs it.
        from pymodbus.client import ModbusSerialClient

        self._client = ModbusSerialClient(
            path, baudrate=baud, bytesize=8, parity="N", stopbits=PZEM_STOPBITS,
            timeout=timeout_s, retries=0, reconnect_delay=0,
        )
        self._slave = slave
        self.path = path
        self._notes = library_notes()
        with self._notes.capture() as notes:
            connected = self._client.connect()
        if not connected:
            # pymodbus logs why the open failed and returns False: whether the port is held
            # elsewhere is asked of the lock itself, and its words are the reason otherwise.
            if port_held_elsewhere(path):
                raise ModbusPortBusy(f"cannot open {path}: held by another process (a running rigmon agent, "
                                     "or a terminal program)")
            raise ModbusPortError(f"cannot open {path}: {_open_failure(path, notes_text(notes))}")
        # The pyserial port pymodbus opened, while it is in exclusive mode.
        self._held: Any = None
        port = self._client.socket
        try:
            if port is None:
                raise OSError("pymodbus opened no port")
            hold_exclusively(port.fileno())
        except (OSError, ValueError) as exc:
            self.close()
            raise ModbusPortError(f"cannot set up {path}: {exc}") from None
        self._held = port

    def read_input_registers(self, address: int, count: int) -> list[int]:
        from pymodbus.exceptions import ConnectionException, ModbusException

        with self._notes.capture() as notes:
            try:
                # The unit-id keyword changed across pymodbus versions (unit=, slave=, device_id=);
                # pyproject pins a range that uses device_id.
                response = self._client.read_input_registers(address, count=count, device_id=self._slave)
            except ConnectionException as exc:
                raise ModbusPortError(_with_notes(f"{self.path}: {exc}", notes)) from None
            except (ModbusException, OSError) as exc:
                if not self._client.connected:
                    raise ModbusPortError(_with_notes(f"{self.path}: {exc}", notes)) from None
                raise _read_error(str(exc), notes) from None
        if response.isError():
            raise _read_error(f"device answered {response}", notes)
        if notes:
            # Said on a read that worked (bytes waiting before the request): no error of ours says it.
            log.warning("%s: %s", self.path, notes_text(notes))
        return list(response.registers)

    def close(self) -> None:
        held, self._held = self._held, None
        # Only the port it held: pymodbus may have closed it (its descriptor number another file's now).
        port = self._client.socket
        if port is not None and port is held and port.is_open:
            release_exclusive(port.fileno())
        self._client.close()  # type: ignore[no-untyped-call]


def port_held_elsewhere(path: str) -> bool:
    """Whether another open of the tty ``path`` holds the exclusive lock pyserial takes (``flock``),
    or keeps the tty in exclusive mode (``TIOCEXCL``: the open itself fails with EBUSY).

    Opened without becoming the controlling terminal and without waiting for carrier; while
    another process has the port open, closing this descriptor does not hang the line up.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as exc:
        return exc.errno == errno.EBUSY
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK)
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _open_failure(path: str, said: str) -> str:
    """Why pymodbus could not open the tty ``path``: asked of the device itself, else what pymodbus
    logged (``said``), which rigmon took out of the log."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as exc:
        return open_failure(path, exc.errno, exc.strerror or type(exc).__name__)
    try:
        if not os.isatty(fd):
            return open_failure(path, errno.ENOTTY, "not a serial port")
    finally:
        os.close(fd)
    return said or "pymodbus gave no reason"


def open_modbus(path: str, baud: int, slave: int) -> InputRegisters:
    """Open a Modbus RTU slave on ``path``.

    Raises:
        ModbusPortBusy: held by another process.
        ModbusPortError: the port cannot be opened.
    """
    return PymodbusDevice(path, baud, slave)
