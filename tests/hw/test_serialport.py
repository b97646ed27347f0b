"""PySerialPort over a real pty: a line that arrives while the reader waits comes in one read; EOF is an error."""

from __future__ import annotations

import contextlib
import os
import select
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rigmon.hw.serialport import (
    READ_TIMEOUT_S,
    PySerialPort,
    SerialPortError,
    cancel_serial_read,
    open_serial,
    pump_serial,
)
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


def test_a_read_waiting_for_a_silent_device_is_cancelled_from_another_thread(device: PtyDevice) -> None:
    """A stopping reader is woken at once, not at the end of its (long) read timeout."""
    port = PySerialPort(str(device.link), 115200, timeout_s=25.5)
    try:
        got: list[bytes] = []
        reader = threading.Thread(target=lambda: pump_serial(port, lambda data: bool(got.append(data)), 4096))
        reader.start()
        time.sleep(0.2)  # the reader waits in the driver
        cancel_serial_read(port)
        reader.join(10.0)
        assert not reader.is_alive()
        assert got == [b""]
    finally:
        port.close()


def test_cancelling_a_closed_port_leaves_its_old_descriptor_alone(device: PtyDevice, tmp_path: Path) -> None:
    """The closed port's descriptor number may belong to another file by then."""
    port = PySerialPort(str(device.link), 115200)
    fd = port._fd
    port.close()
    other = os.open(tmp_path / "other", os.O_RDWR | os.O_CREAT)
    reused = os.dup2(other, fd)  # another file under the old number
    try:
        port.cancel_read()
        assert os.get_blocking(reused)
    finally:
        os.close(reused)
        if other != reused:
            os.close(other)


def test_a_silent_device_wakes_the_reader_once_a_read_timeout(device: PtyDevice) -> None:
    """Each timeout is a wake-up for nothing: the default waits a second (five wake-ups a second at 0.2 s)."""
    port = PySerialPort(str(device.link), 115200)
    try:
        assert READ_TIMEOUT_S == 1.0
        assert termios.tcgetattr(port._fd)[6][termios.VTIME] == 10
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


def test_the_driver_waits_for_the_read_not_a_poll(device: PtyDevice) -> None:
    """One blocking read per chunk: the tty returns what arrived, or nothing after VTIME."""
    port = PySerialPort(str(device.link), 115200, timeout_s=0.2)
    try:
        attrs = termios.tcgetattr(port._fd)
        assert (attrs[6][termios.VMIN], attrs[6][termios.VTIME]) == (0, 2)
        assert os.get_blocking(port._fd)
        device.write(LINE)
        assert port.read(4096) == LINE
        assert port.read(4096) == b""
    finally:
        port.close()


def test_end_of_file_while_readable_twice_is_a_gone_device(device: PtyDevice, tmp_path: Path) -> None:
    """A descriptor at end of file (what a hung-up tty reads) is a gone device, not a timeout
    to retry in a busy loop; pyserial's rule, readable but nothing read, once more to be sure."""
    port = PySerialPort(str(device.link), 115200, timeout_s=0.2)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    os.close(os.open(fifo, os.O_WRONLY))  # the writer came and went: end of file, POLLHUP
    try:
        real_fd = port._fd
        port._fd = reader
        port._poller = select.poll()
        port._poller.register(reader, select.POLLIN | select.POLLPRI)
        with pytest.raises(SerialPortError):
            port.read(4096)
        port._fd = real_fd
    finally:
        os.close(reader)
        port.close()


def test_pump_hands_over_chunks_and_timeouts_until_told_to_stop(device: PtyDevice) -> None:
    port = PySerialPort(str(device.link), 115200, timeout_s=0.1)
    got: list[bytes] = []

    def take(data: bytes) -> bool:
        got.append(data)
        return len(got) < 3

    try:
        device.write(LINE)
        pump_serial(port, take, 4096)
        assert got[0] == LINE and got[1:] == [b"", b""]
    finally:
        port.close()


def test_pump_raises_when_the_device_goes(device: PtyDevice) -> None:
    port = PySerialPort(str(device.link), 115200, timeout_s=0.1)
    try:
        device.unplug()
        with pytest.raises(SerialPortError):
            pump_serial(port, lambda data: True, 4096)
    finally:
        port.close()


def test_a_write_the_device_never_drains_times_out_instead_of_blocking(device: PtyDevice) -> None:
    """The output buffer already full (nobody reads the master): pyserial's write would spin
    on EAGAIN forever, a blocking write would wait forever; ours gives up after its timeout."""
    port = PySerialPort(str(device.link), 115200, timeout_s=0.1)
    other = os.open(os.readlink(device.link), os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
    try:
        with contextlib.suppress(BlockingIOError):
            while True:
                os.write(other, b"x" * 1024)
        done: list[BaseException | None] = []

        def write() -> None:
            try:
                port.write(b"?\n")
                done.append(None)
            except SerialPortError as exc:
                done.append(exc)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        writer.join(5.0)
        assert done and isinstance(done[0], SerialPortError)
        assert os.get_blocking(port._fd)
    finally:
        os.close(other)
        port.close()


def test_a_write_reaches_the_device(device: PtyDevice) -> None:
    port = PySerialPort(str(device.link), 115200, timeout_s=0.1)
    try:
        port.write(b"?\n")
        assert device.read_host() == b"?\n"
    finally:
        port.close()


# ---------------------------------------------------------------------------------------
# Why a port does not open, in the operator's terms (the agent logs and reports these).

_OPEN_BOTH = """
import sys
from rigmon.hw.serialport import open_serial, SerialPortError
from rigmon.hw.modbus import open_modbus, ModbusPortError
for opener in (lambda: open_serial(sys.argv[1], 115200), lambda: open_modbus(sys.argv[1], 9600, 1)):
    try:
        opener().close()
    except (SerialPortError, ModbusPortError) as exc:
        print(exc)
    else:
        print("opened")
"""


def _open_both(path: str, *prefix: str) -> list[str]:
    import subprocess
    import sys

    result = subprocess.run([*prefix, sys.executable, "-c", _OPEN_BOTH, path], capture_output=True, text=True,
                            timeout=60, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    return result.stdout.splitlines()


def test_a_missing_port_says_it_is_gone_or_renamed(tmp_path: Path) -> None:
    for message in _open_both(str(tmp_path / "ttyUSB0")):
        assert "no such device" in message and "/dev/serial/by-id/" in message, message
    # Already a stable name: no advice to use one.
    for message in _open_both(str(tmp_path / "usb-rigmon_rm1-if00")):
        assert "no such device (unplugged?)" in message, message


def test_a_file_that_is_not_a_tty_is_named_so_by_both_openers(tmp_path: Path) -> None:
    path = tmp_path / "not-a-tty"
    path.write_text("")
    for message in _open_both(str(path)):
        assert "a regular file, so not a serial device" in message, message


def test_the_modbus_openers_failure_is_said_in_its_error_not_logged_by_pymodbus(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """pymodbus logs why it could not open a port and returns False; the error said "see the log"."""
    from rigmon.hw.modbus import ModbusPortError, open_modbus

    path = tmp_path / "ttyUSB0"
    path.write_text("")
    path.chmod(0o600)
    with pytest.raises(ModbusPortError) as caught:
        open_modbus(str(path), 9600, 1)
    assert "see the log" not in str(caught.value) and str(path) in str(caught.value)
    assert not [r for r in caplog.records if r.name.startswith("pymodbus")]


def test_permission_denied_names_the_dialout_group(device: PtyDevice) -> None:
    import shutil

    tty_path = os.ttyname(device.slave) if device.slave is not None else ""
    os.chmod(tty_path, 0)
    prefix: tuple[str, ...] = ()
    if os.geteuid() == 0:
        # root reads any file: drop the capability that lets it (the pty stays ours).
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv to drop CAP_DAC_OVERRIDE")
        prefix = (setpriv, "--bounding-set", "-dac_override,-dac_read_search")
    messages = _open_both(tty_path, *prefix)
    assert len(messages) == 2
    for message in messages:
        assert "permission denied" in message and "dialout" in message, message


def _without_sys_admin() -> tuple[str, ...]:
    """A command prefix that takes CAP_SYS_ADMIN away from root (it opens any exclusive tty)."""
    import shutil

    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv to drop CAP_SYS_ADMIN")
    return (setpriv, "--bounding-set", "-sys_admin")


#: What ``cat`` or ``screen`` does: open the tty, no lock asked for.
_OPEN_PLAIN = """
import errno, os, sys
try:
    os.close(os.open(sys.argv[1], os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK))
except OSError as exc:
    print(errno.errorcode[exc.errno])
else:
    print("opened")
"""


def _open_plain(path: str, prefix: tuple[str, ...]) -> str:
    import subprocess
    import sys

    return subprocess.run([*prefix, sys.executable, "-c", _OPEN_PLAIN, path], capture_output=True, text=True,
                          timeout=60, check=False).stdout.strip()


@pytest.mark.parametrize("protocol", ["rm1", "pzem017"])
def test_a_held_port_refuses_programs_that_take_no_lock_and_is_free_again_after_close(
    device: PtyDevice, protocol: str,
) -> None:
    """Only a flock guarded the port: ``cat``, ``screen`` or ModemManager opened it beside the agent and
    each read of theirs took a line from ours, seen as lost windows and nothing else."""
    from rigmon.hw.modbus import open_modbus

    tty_path = os.ttyname(device.slave) if device.slave is not None else ""
    prefix = _without_sys_admin()
    port = open_serial(tty_path, 115200) if protocol == "rm1" else open_modbus(tty_path, 9600, 1)
    try:
        assert _open_plain(tty_path, prefix) == "EBUSY"
        # rigmon's own openers (`rigmon check` beside the agent) say who holds it.
        for message in _open_both(tty_path, *prefix):
            assert "held by another process" in message, message
    finally:
        port.close()
    # Exclusive mode belongs to the tty and outlives a close while another descriptor is open
    # (here the test's own, as a simulator's): it is left before closing.
    assert _open_plain(tty_path, prefix) == "opened"
    assert _open_both(tty_path, *prefix) == ["opened", "opened"]
