"""Why the agent cannot listen where it is told, said the same by the agent at its start and by setup."""

from __future__ import annotations

import errno


def bind_refusal(host: str, port: int, exc: OSError) -> str:
    """The reason binding ``host``:``port`` failed with ``exc``, as an operator reads it.

    Args:
        host: the address of the ``listen`` setting.
        port: its port.
        exc: what ``bind`` raised.

    Returns:
        the reason, naming the port or the address (what the errno says for other errors).
    """
    if exc.errno == errno.EADDRINUSE:
        return f"port {port} is in use by another program (`ss -ltnp 'sport = :{port}'` names it)"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"{host} is not an address of this machine (0.0.0.0:PORT listens on every address)"
    return str(exc)
