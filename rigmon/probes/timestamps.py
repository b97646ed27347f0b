"""Kernel receive times of datagrams (``SO_TIMESTAMPNS``): the prober's, the responder's and the simulated wire's;
and the kernel's count of datagrams a socket dropped (``SO_RXQ_OVFL``): the responder's."""

from __future__ import annotations

import socket
import struct

#: Linux: ask for the kernel's receive time of each datagram (struct timespec, CLOCK_REALTIME).
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_TIMESPEC = struct.Struct("@qq")
#: Control-message room for that receive time, for `recvmsg`.
TIMESTAMP_CMSG_BYTES = socket.CMSG_SPACE(_TIMESPEC.size)
#: Linux: with each datagram, the number the socket dropped so far because its queue was full (uint32).
SO_RXQ_OVFL = getattr(socket, "SO_RXQ_OVFL", 40)
_DROPS = struct.Struct("@I")
#: Control-message room for the receive time and the drop count.
TIMESTAMP_DROPS_CMSG_BYTES = TIMESTAMP_CMSG_BYTES + socket.CMSG_SPACE(_DROPS.size)


def ask_kernel_time(sock: socket.socket) -> bool:
    """Ask the kernel to stamp every datagram ``sock`` receives; ``False`` where it cannot."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def kernel_time_ns(ancdata: list[tuple[int, int, bytes]]) -> int | None:
    """The kernel receive time (Unix ns) in a datagram's control messages, if it is there."""
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(data)
            return int(sec) * 1_000_000_000 + int(nsec)
    return None


def ask_kernel_drops(sock: socket.socket) -> bool:
    """Ask the kernel to tell, with each datagram, how many ``sock`` dropped on a full queue; ``False`` where it cannot."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RXQ_OVFL, 1)
    except OSError:
        return False
    return True


def kernel_drops(ancdata: list[tuple[int, int, bytes]]) -> int | None:
    """Datagrams the socket dropped so far on a full queue (wraps at 2**32), if the control messages say.

    Linux sends the count only once the socket has dropped one: ``None`` also means none yet.
    """
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_RXQ_OVFL and len(data) >= _DROPS.size:
            return int(_DROPS.unpack_from(data)[0])
    return None
