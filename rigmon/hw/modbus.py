"""Modbus RTU over a serial port (PZEM-017 DC meters), through pymodbus: framing and CRC are the library's."""

from __future__ import annotations

import errno
import fcntl
import os
from typing import Protocol

from rigmon.hw.serialport import open_failure

#: PZEM-017: 9600 baud, 8 data bits, no parity, 2 stop bits (manual; Tasmota opens it 8N2).
PZEM_STOPBITS = 2


class ModbusPortError(Exception):
    """The port cannot be opened or went away."""


class ModbusPortBusy(ModbusPortError):
    """Another process holds the port's exclusive lock: a running rigmon agent, or a terminal program."""


class ModbusReadError(Exception):
    """The device did not answer, or answered with an error or a bad frame."""


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
        if not self._client.connect():
            # pymodbus logs why the open failed and returns False: whether the port is held
            # elsewhere is asked of the lock itself.
            if port_held_elsewhere(path):
                raise ModbusPortBusy(f"cannot open {path}: held by another process (a running rigmon agent, "
                                     "or a terminal program)")
            raise ModbusPortError(f"cannot open {path}: {_open_failure(path)}")

    def read_input_registers(self, address: int, count: int) -> list[int]:
        from pymodbus.exceptions import ConnectionException, ModbusException

        try:
            # The unit-id keyword changed across pymodbus versions (unit=, slave=, device_id=);
            # pyproject pins a range that uses device_id.
            response = self._client.read_input_registers(address, count=count, device_id=self._slave)
        except ConnectionException as exc:
            raise ModbusPortError(f"{self.path}: {exc}") from None
        except (ModbusException, OSError) as exc:
            if not self._client.connected:
                raise ModbusPortError(f"{self.path}: {exc}") from None
            raise ModbusReadError(str(exc)) from None
        if response.isError():
            raise ModbusReadError(f"device answered {response}")
        return list(response.registers)

    def close(self) -> None:
        self._client.close()  # type: ignore[no-untyped-call]


def port_held_elsewhere(path: str) -> bool:
    """Whether another open of the tty ``path`` holds the exclusive lock pyserial takes (``flock``).

    Opened without becoming the controlling terminal and without waiting for carrier; while
    another process has the port open, closing this descriptor does not hang the line up.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK)
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _open_failure(path: str) -> str:
    """Why pymodbus could not open the tty ``path`` (it only logs it): asked of the device itself."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as exc:
        return open_failure(path, exc.errno, exc.strerror or type(exc).__name__)
    try:
        if not os.isatty(fd):
            return "not a serial port"
    finally:
        os.close(fd)
    return "see the log for pymodbus's reason"


def open_modbus(path: str, baud: int, slave: int) -> InputRegisters:
    """Open a Modbus RTU slave on ``path``.

    Raises:
        ModbusPortBusy: held by another process.
        ModbusPortError: the port cannot be opened.
    """
    return PymodbusDevice(path, baud, slave)
