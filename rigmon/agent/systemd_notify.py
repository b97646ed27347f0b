"""Telling systemd that the agent listens (``Type=notify``): the sd_notify datagram, without libsystemd.

With ``Type=exec`` a ``systemctl start`` succeeded once the program ran, so an agent that could
not bind its port (another program took it after `rigmon setup agent` checked it) failed a moment
later, and again at every restart, while setup said it had started. With ``Type=notify`` the start
waits for ``READY=1``, sent once the port is bound, and fails with the agent's exit instead.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

log = logging.getLogger(__name__)


def notify_ready(status: str, environ: Mapping[str, str] | None = None) -> bool:
    """Send ``READY=1`` and ``STATUS=<status>`` to the socket systemd names in ``NOTIFY_SOCKET``.

    Args:
        status: one line ``systemctl status`` shows (``listening on https://0.0.0.0:9871``).
        environ: the environment to read (default the process's).

    Returns:
        whether it was sent: not when the variable is unset (not started by systemd, or by a unit of
        another type) or names no socket this process can reach (logged).
    """
    env = os.environ if environ is None else environ
    address = env.get("NOTIFY_SOCKET", "")
    if address.startswith("@"):
        address = "\0" + address[1:]  # an abstract socket
    elif not address.startswith("/"):
        return False  # unset, or a VSOCK address: not one a service is given
    message = f"READY=1\nSTATUS={' '.join(status.split())}".encode(errors="replace")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message)
    except OSError as exc:
        log.warning("cannot tell systemd the agent is ready (NOTIFY_SOCKET %s): %s", env.get("NOTIFY_SOCKET"), exc)
        return False
    return True
