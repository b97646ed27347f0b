"""Whether the agent will be able to listen where its configuration says, before setup starts it.

The unit is ``Type=notify``: ``systemctl start`` waits for the agent to bind its port and fails when
it cannot (its error, in the unit's log, names the address and ``agent.listen``). This check comes
first so that setup names the port itself, also in a dry run, and starts nothing that would fail;
a program that takes the port between the check and the start fails the start, which setup reports
with the agent's own line (see `last_error`).
"""

from __future__ import annotations

import errno
import socket
import subprocess
from collections.abc import Callable

from rigmon.agent.listen_errors import bind_refusal
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
        if exc.errno == errno.EADDRINUSE and agent_running():
            return None
        if exc.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
            stop = "stop that program, or " if exc.errno == errno.EADDRINUSE else ""
            return (f"{bind_refusal(host, port, exc)}: the agent could not listen on {listen}; "
                    f"{stop}change listen in the configuration (agent.listen)")
        return None  # anything else (permissions of a port below 1024...): the agent's log tells
    return None


def unit_active(unit: str) -> bool:
    """Whether systemd says ``unit`` is active (a query: nothing changes)."""
    try:
        return subprocess.run(["systemctl", "is-active", "--quiet", unit], check=False, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def last_error(unit: str, since: float) -> str | None:
    """The last line ``rigmon agent`` gave as its reason to stop (``rigmon: ...``) in ``unit``'s log since
    ``since`` (Unix seconds), or ``None``: what a failed ``systemctl start`` does not say itself."""
    try:
        out = subprocess.run(["journalctl", "--unit", unit, "--since", f"@{int(since)}", "--output", "cat",
                              "--no-pager", "--quiet"], capture_output=True, text=True, check=False, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    said = [line for line in out.splitlines() if line.startswith("rigmon: ")]
    return said[-1] if said else None
