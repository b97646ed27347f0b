"""Serial ports for rail ADCs and meters: pyserial behind a small protocol, opened exclusively."""

from __future__ import annotations

import errno
import fcntl
import math
import os
import select
import stat
import termios
import threading
import time
from collections.abc import Callable
from typing import Protocol

# pyserial (`serial`) is imported where a port is opened: an agent without a serial ADC never does.


class SerialPortError(Exception):
    """The port cannot be opened, or it went away (unplugged, device reset)."""


class SerialPortBusy(SerialPortError):
    """Another process holds the port's exclusive lock: a running rigmon agent, or a terminal program."""


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


#: Longest a `PySerialPort.write` waits for the device to take the bytes.
WRITE_TIMEOUT_S = 0.5
#: Longest a read waits for the device by default. Each timeout wakes the reader for nothing
#: (~130 us of CPU on a VM, most of it the kernel's timer wake-up and the thread's cold start):
#: a reader that must stop at once is woken by `cancel_serial_read`, not by short timeouts.
READ_TIMEOUT_S = 1.0
#: Events that say the device is gone (a hung-up tty reports them with end of file).
_GONE = select.POLLHUP | select.POLLERR | select.POLLNVAL


class PySerialPort:
    """A tty opened with pyserial: raw 8N1, exclusive (flock and ``TIOCEXCL``), short read timeout.

    pyserial opens and configures the port; reads go to its descriptor directly, one
    blocking ``read`` per chunk the driver has: the tty driver itself waits for the first
    byte or the timeout (``VMIN`` 0, ``VTIME``), so a line costs one system call and one
    hand-over of the GIL. pyserial's own ``read`` costs several times that: with nothing
    waiting it reads a single byte, then the rest of the line in a second call, each
    through its timeout bookkeeping and an extra ``select``; a ``poll`` before each
    ``read`` costs a second call and a second GIL hand-over (on a pty, about 8 us a line).

    Args:
        path: device path (a ``/dev/serial/by-id/`` link is resolved at each open).
        baud: line speed; USB CDC devices ignore it.
        timeout_s: longest a `read` waits, so the reader comes back now and then while the
            device is silent (rounded up to the tty's tenths of a second, at most 25.5 s);
            `cancel_read` ends a waiting read at once.
    """

    def __init__(self, path: str, baud: int, timeout_s: float = READ_TIMEOUT_S) -> None:
        import serial

        port = serial.Serial()
        port.port = path
        port.baudrate = baud
        port.timeout = timeout_s
        port.write_timeout = WRITE_TIMEOUT_S
        # exclusive takes a POSIX flock, so a second rigmon or a terminal program cannot
        # interleave reads with ours.
        port.exclusive = True
        try:
            port.open()
        except (serial.SerialException, OSError, ValueError) as exc:
            error = _open_errno(exc)
            if error in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EBUSY):
                # pyserial's flock(LOCK_EX | LOCK_NB) failed, or the tty is in exclusive mode
                # (`hold_exclusively`): the port is open elsewhere.
                raise SerialPortBusy(f"cannot open {path}: held by another process (a running rigmon agent, "
                                     "or a terminal program)") from None
            raise SerialPortError(f"cannot open {path}: {open_failure(path, error, _reason(exc))}") from None
        self._port = port
        self.path = path
        self._fd: int = port.fileno()
        try:
            # pyserial opened the descriptor non-blocking with VMIN = VTIME = 0 (it waits in
            # select); make the driver wait instead: a read returns as soon as bytes arrived,
            # or empty after VTIME tenths of a second.
            attrs = termios.tcgetattr(self._fd)
            attrs[6][termios.VMIN] = 0
            attrs[6][termios.VTIME] = min(255, max(1, math.ceil(timeout_s * 10)))
            termios.tcsetattr(self._fd, termios.TCSANOW, attrs)
            os.set_blocking(self._fd, True)
            hold_exclusively(self._fd)
        except (termios.error, OSError) as exc:
            port.close()
            raise SerialPortError(f"cannot set up {path}: {_reason(exc)}") from None
        self._poller = select.poll()
        self._poller.register(self._fd, select.POLLIN | select.POLLPRI)
        self._empty_while_readable = False
        # `cancel_read` (another thread) never touches the descriptor after `close`: its number
        # may belong to another file by then.
        self._closing = threading.Lock()
        self._closed = False

    def read(self, max_bytes: int) -> bytes:
        try:
            data = os.read(self._fd, max_bytes)
        except BlockingIOError:
            return b""
        except (OSError, ValueError) as exc:
            # An unplugged device reads EIO; EBADF/ValueError: the fd was closed under us.
            raise SerialPortError(f"{self.path}: {_read_failure(exc)}") from None
        if data:
            self._empty_while_readable = False
            return data
        return self._nothing_read()

    def pump(self, take: Callable[[bytes], bool], max_bytes: int) -> None:
        """`pump_serial` for this port: the same reads, without a method call per wake-up."""
        fd = self._fd
        read = os.read
        while True:
            try:
                data = read(fd, max_bytes)
            except BlockingIOError:
                data = b""
            except (OSError, ValueError) as exc:
                raise SerialPortError(f"{self.path}: {_read_failure(exc)}") from None
            if data:
                self._empty_while_readable = False
            else:
                data = self._nothing_read()
            if not take(data):
                return

    def _nothing_read(self) -> bytes:
        """After an empty read: the timeout ran out (``b""``), or the device is gone (raises).

        A hung-up tty (a USB device unplugged) reads end of file at once and polls as hung
        up. A descriptor that polls readable but reads nothing twice in a row is gone too
        (pyserial's rule); once is not enough, bytes may have arrived just after the read.
        """
        try:
            events = self._poller.poll(0)
        except (OSError, ValueError) as exc:
            raise SerialPortError(f"{self.path}: {_reason(exc)}") from None
        mask = events[0][1] if events else 0
        if mask & _GONE or (mask and self._empty_while_readable):
            # pyserial says the same in these words.
            raise SerialPortError(f"{self.path}: device reports readiness to read but returned no data "
                                  "(device disconnected or multiple access on port?)")
        self._empty_while_readable = bool(mask)
        return b""

    def write(self, data: bytes) -> None:
        """Send ``data`` within `WRITE_TIMEOUT_S`, or raise `SerialPortError`.

        Not through pyserial's write: on a non-blocking descriptor whose output buffer is full
        it retries EAGAIN in a busy loop with no timeout, and on the blocking one reads use it
        would wait as long as a device does not take its input.
        """
        started = time.monotonic()
        view = memoryview(data)
        poller = select.poll()
        poller.register(self._fd, select.POLLOUT)
        try:
            os.set_blocking(self._fd, False)
            try:
                while view:
                    left_ms = (WRITE_TIMEOUT_S - (time.monotonic() - started)) * 1000.0
                    if left_ms <= 0 or not poller.poll(left_ms):
                        raise SerialPortError(f"{self.path}: write timed out (the device does not take input)")
                    try:
                        view = view[os.write(self._fd, view):]
                    except BlockingIOError:
                        pass
            finally:
                os.set_blocking(self._fd, True)
        except (OSError, ValueError) as exc:
            raise SerialPortError(f"{self.path}: {_reason(exc)}") from None

    def cancel_read(self) -> None:
        """End a read waiting in another thread now; it returns ``b""`` like a timeout. For stopping:
        from then on every read returns at once.

        The descriptor is made non-blocking and its settings applied again: a termios change
        wakes the tty's readers (``n_tty_set_termios``), and a woken read with nothing to
        return on a non-blocking file returns EAGAIN. A driver that did not wake the read
        leaves it to its timeout.
        """
        with self._closing:
            if self._closed:
                return
            try:
                os.set_blocking(self._fd, False)
                termios.tcsetattr(self._fd, termios.TCSANOW, termios.tcgetattr(self._fd))
            except (termios.error, OSError):
                pass

    def reset_input(self) -> None:
        import serial

        try:
            self._port.reset_input_buffer()
        except (serial.SerialException, OSError) as exc:
            raise SerialPortError(f"{self.path}: {_reason(exc)}") from None

    def close(self) -> None:
        import serial

        with self._closing:
            if not self._closed:
                # Once: after the close the number may be another file's.
                release_exclusive(self._fd)
            self._closed = True
            try:
                self._port.close()
            except (serial.SerialException, OSError):
                pass


def hold_exclusively(fd: int) -> None:
    """Put the tty open on ``fd`` in exclusive mode (``TIOCEXCL``): any other open of it fails
    with EBUSY (except by root).

    The ``flock`` pyserial takes stops only programs that ask for it (another rigmon, pyserial
    with ``exclusive``); ``cat``, ``screen`` or ModemManager open the port regardless and each
    read of theirs takes a line from ours, seen here as lost windows and nothing more.

    Raises:
        OSError: the descriptor is not a tty.
    """
    fcntl.ioctl(fd, termios.TIOCEXCL)


def release_exclusive(fd: int) -> None:
    """Leave exclusive mode before closing ``fd``: the mode belongs to the tty, not to the
    descriptor, and outlives this open while another one is left (a simulator's pty, a program
    that opened the port before rigmon), refusing every later open of the port."""
    try:
        fcntl.ioctl(fd, termios.TIOCNXCL)
    except (OSError, ValueError):
        pass


def pump_serial(port: SerialPort, take: Callable[[bytes], bool], max_bytes: int) -> None:
    """Read ``port`` until ``take`` returns False.

    ``take`` gets every chunk received (at most ``max_bytes``), and ``b""`` when a read
    timed out, so that it can stop the pump while nothing arrives.

    Raises:
        SerialPortError: the device is gone.
    """
    if isinstance(port, PySerialPort):
        port.pump(take, max_bytes)
        return
    while take(port.read(max_bytes)):
        pass


def cancel_serial_read(port: SerialPort) -> None:
    """End a read of ``port`` waiting in another thread, where the port can (`PySerialPort.cancel_read`);
    other ports' reads end at their timeout."""
    if isinstance(port, PySerialPort):
        port.cancel_read()


def open_serial(path: str, baud: int) -> SerialPort:
    """Open ``path`` exclusively at ``baud``.

    Raises:
        SerialPortBusy: held by another process.
        SerialPortError: absent, or not a tty.
    """
    return PySerialPort(path, baud)


def open_failure(path: str, error: int | None, reason: str) -> str:
    """Why a serial port did not open, in the operator's terms where the errno says it.

    Args:
        path: the configured device.
        error: the ``errno`` of the failed open, if any.
        reason: the library's own words, used for every other error.
    """
    kind = not_a_tty(path, error)
    if kind is not None:
        # A path typo'd to a file a script left, or to the /dev/serial/by-id/ directory itself: said
        # so, not as the library's "Inappropriate ioctl for device" or "Is a directory".
        return not_a_serial_device(kind)
    if error in (errno.EACCES, errno.EPERM):
        return ("permission denied: the agent's user must be in the group that owns the tty "
                "(usually dialout), or a udev rule must give it that group")
    if error in (errno.ENOENT, errno.ENODEV, errno.ENXIO):
        if os.path.basename(path).startswith("tty"):
            # A kernel name: a USB adapter that re-enumerates comes back as another ttyUSBn.
            return ("no such device: unplugged, or it came back under another name "
                    "(configure its /dev/serial/by-id/ link, not the kernel's ttyUSBn/ttyACMn)")
        return "no such device (unplugged?)"
    return reason


#: What a path that is no terminal is, by its file type (a character device is asked separately).
_NOT_TTY_KINDS: tuple[tuple[Callable[[int], bool], str], ...] = (
    (stat.S_ISDIR, "a directory"), (stat.S_ISREG, "a regular file"), (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"), (stat.S_ISBLK, "a block device"),
)


def not_a_tty(path: str, error: int | None) -> str | None:
    """What ``path`` is when it is there but no terminal (``"a directory"``, ``"a regular file"``), after an
    open of it failed with ``error``; ``None`` when it may be a tty, or is not there.

    A ``/dev/serial/by-id/`` link is followed. A character device is no terminal only when it said so
    (ENOTTY: ``/dev/null``): it is never opened here, as opening a real serial port may reset its device.
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISCHR(mode):
        return "a character device but not a terminal (ENOTTY)" if error == errno.ENOTTY else None
    return next((kind for is_kind, kind in _NOT_TTY_KINDS if is_kind(mode)), None)


def not_a_serial_device(kind: str) -> str:
    """Why a path that is ``kind`` (`not_a_tty`) cannot be the device, and what to configure instead."""
    return f"{kind}, so not a serial device; set the port to the device's tty (ls /dev/serial/by-id/)"


def _open_errno(exc: BaseException) -> int | None:
    """The ``errno`` of a failed open: the exception's own, or that of the ``termios.error`` pyserial
    raised its "Could not configure port" from (ENOTTY: the path opened, but is no terminal)."""
    error = getattr(exc, "errno", None)
    if error is None and isinstance(exc.__context__, termios.error) and exc.__context__.args:
        cause = exc.__context__.args[0]
        return cause if isinstance(cause, int) else None
    return error if isinstance(error, int) else None


def _read_failure(exc: BaseException) -> str:
    """Why a read failed: an unplugged USB serial device (or one that reset) reads EIO."""
    if isinstance(exc, OSError) and exc.errno == errno.EIO:
        return f"{_reason(exc)}: unplugged, or the device reset"
    return _reason(exc)


def _reason(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
    return text or type(exc).__name__
