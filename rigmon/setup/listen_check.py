"""Whether the agent will be able to listen where its configuration says, before setup starts it.

The unit is ``Type=exec``: ``systemctl start`` succeeds once the program runs, so an agent that
cannot bind its port (another program holds it; an address this machine does not have) fails a
moment later and again on every restart, while setup has said the installation succeeded.
"""

from __future__ import annotations

import errno
import socket
import subprocess
from collections.abc import Callable

from rigmon.config import split_listen


def listen_problem(listen: str, agent_running: Callable[[], bool]) -> str | None:
    """Why an agent started now could not listen on ``listen`` (``HOST:PORT``), or ``None``.

    A port held while ``agent_running()`` says the service runs is taken to be the agent's own (a
    restart frees it). The socket is bound as uvicorn binds it (``SO_REUSEADDR``), then closed.
    """
    host, port = split_listen(listen)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            if agent_running():
                return None
            return (f"port {port} is in use by another program (`ss -ltnp 'sport = :{port}'` names it): the agent "
                    f"could not listen on {listen}; stop that program, or change listen in the configuration")
        if exc.errno == errno.EADDRNOTAVAIL:
            return (f"{host} is not an address of this machine: the agent could not listen on {listen}; "
                    "change listen in the configuration (0.0.0.0:PORT listens on every address)")
        return None  # anything else (permissions of a port below 1024...): the agent's log tells
    return None


def unit_active(unit: str) -> bool:
    """Whether systemd says ``unit`` is active (a query: nothing changes)."""
    try:
        return subprocess.run(["systemctl", "is-active", "--quiet", unit], check=False, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
