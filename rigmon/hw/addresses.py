"""This machine's own IP addresses (every interface's), for telling a ``[[peers]]`` entry that is this node."""

from __future__ import annotations

import ipaddress
import logging

log = logging.getLogger(__name__)

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def local_addresses() -> frozenset[IpAddress]:
    """The IPv4 and IPv6 addresses of this machine's interfaces (link-local ones without their zone);
    empty when they cannot be listed (the caller then tells only loopback addresses as its own)."""
    import psutil

    try:
        interfaces = psutil.net_if_addrs()
    except OSError as exc:
        log.warning("cannot list this machine's addresses: %s", exc)
        return frozenset()
    out: set[IpAddress] = set()
    for addrs in interfaces.values():
        for addr in addrs:
            try:
                out.add(ipaddress.ip_address(addr.address.partition("%")[0]))
            except ValueError:
                continue  # a MAC address (AF_PACKET) or another family
    return frozenset(out)
