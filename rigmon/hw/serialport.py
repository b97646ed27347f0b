"""Serial ports for rail ADCs and meters: pyserial behind a small protocol, opened exclusively."""

from __future__ import annotations

from typing import Protocol

import serial


class SerialPortError(Exception):
    """The port cannot be opened, or it went away (unplugged, device reset)."""


class SerialPort(Protocol):
    """An open serial port as the rail reader uses it."""

    def read(self, max_bytes: int) -> bytes:
        """Bytes received so far (up to ``max_bytes``); ``b""`` after the read timeout.

        Raises:
            SerialPortError: the device is gone.
        """
        ...

    def write(self, data: bytes) -> None:
        """Send bytes to the device (best effort)."""
        ...

    def reset_input(self) -> None:
        """Discard what the driver buffered before now."""
        ...

    def close(self) -> None:
        """Release the port."""
        ...


class PySerialPort:
    """A tty opened with pyserial: raw 8N1, exclusive (flock), short read timeout.

    Args:
        path: device path (a ``/dev/serial/by-id/`` link is resolved at each open).
        baud: line speed; USB CDC devices ignore it.
        timeout_s: longest a `read` waits, so the reader can notice it was asked to stop.
    """

    def __init__(self, path: str, baud: int, timeout_s: float = 0.2) -> None:
        port = serial.Serial()
        port.port = path
        port.baudrate = baud
        port.timeout = timeout_s
        port.write_timeout = 0.5
        # exclusive takes a POSIX flock, so a second rigmon or a terminal program cannot
        # interleave reads with ours.
        port.exclusive = True
        try:
            port.open()
        except (serial.SerialException, OSError, ValueError) as exc:
            raise SerialPortError(f"cannot open {path}: {_reason(exc)}") from None
        self._port = port
        self.path = path

    def read(self, max_bytes: int) -> bytes:
        try:
            waiting = self._port.in_waiting
            data: bytes = self._port.read(min(max_bytes, waiting) if waiting else 1)
        except (serial.SerialException, OSError, TypeError) as exc:
            # An unplugged device reads EOF or EIO; pyserial reports "device reports
            # readiness to read but returned no data". TypeError: the fd was closed under us.
            raise SerialPortError(f"{self.path}: {_reason(exc)}") from None
        return data

    def write(self, data: bytes) -> None:
        try:
            self._port.write(data)
        except (serial.SerialException, OSError) as exc:
            raise SerialPortError(f"{self.path}: {_reason(exc)}") from None

    def reset_input(self) -> None:
        try:
            self._port.reset_input_buffer()
        except (serial.SerialException, OSError) as exc:
            raise SerialPortError(f"{self.path}: {_reason(exc)}") from None

    def close(self) -> None:
        try:
            self._port.close()
        except (serial.SerialException, OSError):
            pass


def open_serial(path: str, baud: int) -> SerialPort:
    """Open ``path`` exclusively at ``baud``.

    Raises:
        SerialPortError: absent, busy (held by another process), or not a tty.
    """
    return PySerialPort(path, baud)


def _reason(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
    return text or type(exc).__name__
