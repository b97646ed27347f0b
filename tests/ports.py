"""A TCP port on 127.0.0.1 for a process a test starts (an agent, Prometheus) that is free now and stays so.

A port the kernel hands out for ``bind(("127.0.0.1", 0))`` is from its ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``, 32768-60999 by default), and released before the process binds
it: any outgoing connection of the run (the suite's hundreds of clients) may be given it meanwhile, and the
agent then fails with "port ... is in use by another program" (a fresh-clone CI run did). Ports below that
range are never given to connections, so one found free there stays free unless a test binds it on purpose.
"""

from __future__ import annotations

import random
import socket

#: Ports drawn from: below the kernel's ephemeral range, above the well-known and common service ports.
LOW, HIGH = 20000, 32000


def free_port() -> int:
    """A port free on 127.0.0.1 now, outside the range connections are given ports from."""
    for _ in range(200):
        port = random.randint(LOW, HIGH)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port between {LOW} and {HIGH} on 127.0.0.1")
