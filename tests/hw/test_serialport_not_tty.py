"""A port path that is there but no serial device (a directory, a regular file, ``/dev/null``) is named
for what it is, with what to configure instead; not in the library's words ("Inappropriate ioctl for
device", "Is a directory"), which sent the operator to the device and its driver."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from rigmon.hw.modbus import ModbusPortError, open_modbus
from rigmon.hw.serialport import SerialPortError, open_serial
from tests.collectors.psu_helpers import PtyDevice

ADVICE = "so not a serial device; set the port to the device's tty (ls /dev/serial/by-id/)"


@pytest.fixture
def device(tmp_path: Path) -> Iterator[PtyDevice]:
    dev = PtyDevice(tmp_path)
    yield dev
    dev.unplug()


def _refusals(path: Path | str) -> list[str]:
    """What the serial and the Modbus openers say when ``path`` does not open."""
    said: list[str] = []
    try:
        open_serial(str(path), 115200).close()
    except SerialPortError as exc:
        said.append(str(exc))
    try:
        open_modbus(str(path), 9600, 1).close()
    except ModbusPortError as exc:
        said.append(str(exc))
    return said


def _regular_file(tmp_path: Path) -> Path:
    path = tmp_path / "ttyUSB0"  # what `echo x > /dev/ttyUSB0` leaves while no adapter is plugged
    path.write_text("x\n")
    return path


def _directory(tmp_path: Path) -> Path:
    path = tmp_path / "dev" / "serial" / "by-id"  # the directory, not a link in it
    path.mkdir(parents=True)
    return path


def _link_to_a_file(tmp_path: Path) -> Path:
    link = tmp_path / "usb-rigmon_rm1-if00"
    link.symlink_to(_regular_file(tmp_path))
    return link


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(("make", "kind"), [
    (_regular_file, "a regular file"), (_directory, "a directory"), (_link_to_a_file, "a regular file"),
    (_fifo, "a FIFO"),
])
def test_a_path_that_is_no_tty_is_named_for_what_it_is(tmp_path: Path, make: object, kind: str) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    said = _refusals(path)
    assert len(said) == 2
    for message in said:
        assert message == f"cannot open {path}: {kind}, {ADVICE}", message


def test_a_character_device_that_is_no_terminal_says_enotty() -> None:
    for message in _refusals("/dev/null"):
        assert message == f"cannot open /dev/null: a character device but not a terminal (ENOTTY), {ADVICE}"


def test_a_missing_path_is_still_a_device_not_there(tmp_path: Path) -> None:
    """A USB adapter re-enumerating: the path briefly gone is not called "not a serial device"."""
    for message in _refusals(tmp_path / "ttyUSB0"):
        assert "no such device" in message and "not a serial device" not in message, message


def test_a_pty_is_a_tty_and_opens(device: PtyDevice) -> None:
    """A pseudo-terminal is a terminal: its by-id style link opens with both openers."""
    assert _refusals(device.link) == []
