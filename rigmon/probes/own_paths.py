"""Which ``[[peers]]`` entries are this node under another name: a path whose probes would reach its own agent.

One peers file serves every node of the lab; each node skips the entry named as itself
(`rigmon.config.AgentConfig.probed_peers`). An entry under another name (a host alias, an old
name) whose path's address is one of this node's, at this node's own port, would be probed too:
this node's responder answering itself, a ~0 us round trip read as a link's. Pure: the node's
addresses come in (`rigmon.hw.addresses.local_addresses`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Sequence

from rigmon.config import PeerPathSection, PeerSection, ProbesSection

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def _ip(text: str) -> IpAddress | None:
    try:
        return ipaddress.ip_address(text.partition("%")[0])
    except ValueError:
        return None


def is_own_path(path: PeerPathSection, probes: ProbesSection, listen_port: int | None,
                own: Collection[IpAddress]) -> bool:
    """Whether probes of ``path`` reach this node's own agent.

    Its address is this node's (any loopback address, or one of ``own``) and its port this node's:
    ``[probes] port`` for ``udp`` (unknown when 0: any free port, so never), the agent's ``listen``
    port for ``tcp``; and the responder listens on that address (``bind`` is a wildcard, or it). The
    simulator's nodes share one machine's loopback at different ports: they are other nodes.
    """
    address = _ip(path.address)
    if address is None or not (address.is_loopback or address in own):
        return False
    own_port = probes.port if path.transport == "udp" else listen_port
    if not own_port or path.target_port(probes) != own_port:
        return False
    if path.transport == "tcp":
        return True
    bind = _ip(probes.bind)
    return bind is None or bind.is_unspecified or bind == address


def own_address_peers(peers: Sequence[PeerSection], probes: ProbesSection, listen_port: int | None,
                      own: Collection[IpAddress]) -> list[tuple[PeerSection, PeerPathSection]]:
    """The entries of ``peers`` that are this node, each with its first path that says so."""
    out: list[tuple[PeerSection, PeerPathSection]] = []
    for peer in peers:
        path = next((p for p in peer.paths if is_own_path(p, probes, listen_port, own)), None)
        if path is not None:
            out.append((peer, path))
    return out


def own_address_note(node: str, peer: PeerSection, path: PeerPathSection) -> str:
    """What the agent and ``rigmon check`` say of such an entry, as of the entry named as this node."""
    return (f"[[peers]] lists this node ({node}) as {peer.name} (path {path.name}: {path.address} is this node's "
            "address): skipped, not probed (the same peers file serves every node of the lab)")
