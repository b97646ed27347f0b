"""Kernel receive times of datagrams (``SO_TIMESTAMPNS``): the prober's, the responder's and the simulated wire's."""

from __future__ import annotations

import socket
import struct

#: Linux: ask for the kernel's receive time of each datagram (struct timespec, CLOCK_REALTIME).
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_TIMESPEC = struct.Struct("@qq")
#: Control-message room for that receive time, for `recvmsg`.
TIMESTAMP_CMSG_BYTES = socket.CMSG_SPACE(_TIMESPEC.size)


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
