"""PySerialPort over a real pty: a line that arrives while the reader waits comes in one read; EOF is an error."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rigmon.hw.serialport import PySerialPort, SerialPortError
from tests.collectors.psu_helpers import PtyDevice

LINE = b"$RM1,seq=1,up=100,win=100,n=9,v=12010/11950/12050,i=80000/79000/81000*00\r\n"


@pytest.fixture
def device(tmp_path: Path) -> Iterator[PtyDevice]:
    dev = PtyDevice(tmp_path)
    yield dev
    dev.unplug()


def test_a_line_written_while_the_reader_waits_is_read_whole(device: PtyDevice) -> None:
    port = PySerialPort(str(device.link), 115200, timeout_s=5.0)
    try:
        got: list[bytes] = []
        reader = threading.Thread(target=lambda: got.append(port.read(4096)))
        reader.start()
        # The reader is blocked with nothing waiting (the case where pyserial's read took
        # one byte, and the rest of the line in a second call).
        time.sleep(0.2)
        device.write(LINE)
        reader.join(5.0)
        assert got == [LINE]
    finally:
        port.close()


def test_nothing_to_read_is_empty_after_the_timeout(device: PtyDevice) -> None:
    port = PySerialPort(str(device.link), 115200, timeout_s=0.05)
    try:
        assert port.read(4096) == b""
    finally:
        port.close()


def test_unplugged_device_raises(device: PtyDevice) -> None:
    port = PySerialPort(str(device.link), 115200, timeout_s=1.0)
    try:
        device.unplug()
        with pytest.raises(SerialPortError):
            for _ in range(3):
                port.read(4096)
    finally:
        port.close()
