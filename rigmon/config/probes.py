"""``[probes]`` and ``[[peers]]``: latency probes between agents."""

from __future__ import annotations

import ipaddress
from typing import Literal

import msgspec

from rigmon.config.common import DEFAULT_PORT, check_ranges


#: UDP port of the latency probe responder (issue 21).
DEFAULT_PROBE_PORT = 9872
#: Probes one path keeps for its window (each is remembered until the window has passed it).
MAX_PROBES_PER_WINDOW = 36_000
#: The longest network interface name Linux takes (IFNAMSIZ less its NUL).
MAX_INTERFACE_NAME = 15


class ProbesSection(msgspec.Struct, frozen=True, gc=False):
    """``[probes]``: latency probes between agents (README "Latency probes"); on when ``[[peers]]`` exist."""

    rate_hz: float = 10.0
    """Probes per second on each path."""
    window_s: float = 10.0
    """Seconds of probes the statistics (p50, p99, max, jitter, loss) cover."""
    port: int = DEFAULT_PROBE_PORT
    """UDP port the responder listens on and the default port probes are sent to (0: any free port)."""
    bind: str = "0.0.0.0"
    """Address the responder binds to (it answers only authenticated requests from configured peers);
    ``::`` for IPv6 and IPv4."""
    p99_limit_us: float = 1000.0
    """A path whose p99 round trip is above this (microseconds) is degraded; per path: ``p99_limit_us``."""
    loss_limit_pct: float = 2.0
    """A path losing more than this share of its probes (percent) is degraded."""
    key_file: str = ""
    """File holding the probe key shared by every agent of the cluster; empty: derived from the
    agent's read token (``token_file``), so all agents must then share that token."""
    reply_rate_per_s: float = 200.0
    """Requests per second the responder examines from one source address on average (token bucket), so
    at most as many replies: the budget is spent before the MAC is computed, and requests over it are
    refused as ``rate`` (a flood) with no MAC computed."""
    reply_burst: int = 100
    """Requests the responder examines (replies it sends) from one source address at once before the rate applies."""

    def __post_init__(self) -> None:
        check_ranges(self, {"rate_hz": (0.1, 1000.0), "window_s": (1.0, 3600.0), "port": (0, 65535),
                            "p99_limit_us": (1.0, 60e6), "loss_limit_pct": (0.0, 100.0),
                            "reply_rate_per_s": (1.0, 1e6), "reply_burst": (1, 1_000_000)})
        try:
            ipaddress.ip_address(self.bind)
        except ValueError:
            raise ValueError(f"bind must be an IP address, got {self.bind!r}") from None
        if self.rate_hz > self.reply_rate_per_s:
            # A peer with the same [probes] refuses the excess ("rate"): every path would read lossy and alarm.
            raise ValueError(f"rate_hz ({self.rate_hz:g}) must be at most reply_rate_per_s ({self.reply_rate_per_s:g}), "
                             "the replies a peer sends to one address a second: raise reply_rate_per_s on every node")
        if self.rate_hz * self.window_s > MAX_PROBES_PER_WINDOW:
            raise ValueError(f"rate_hz x window_s must be at most {MAX_PROBES_PER_WINDOW} probes per path and window, "
                             f"got {self.rate_hz * self.window_s:g}")


def _check_name(what: str, name: str) -> None:
    if not name or "/" in name or not name.isprintable() or name != name.strip() or len(name) > 64:
        raise ValueError(f"{what} must be 1-64 printable characters without '/' or surrounding spaces, got {name!r}")


def _check_interface(interface: str, address: str) -> None:
    """A path's ``interface`` is a name Linux could give an interface, and the one a link-local
    address's zone names (``fe80::2%thunderbolt0``): its speed under /sys/class/net is the path's."""
    if not interface:
        return
    if (len(interface) > MAX_INTERFACE_NAME or interface in (".", "..") or "/" in interface
            or any(c.isspace() for c in interface) or not interface.isprintable()):
        raise ValueError(f"interface must be a network interface name (1-{MAX_INTERFACE_NAME} characters, "
                         f"no '/' or blanks, as `ip link` lists them), got {interface!r}")
    _, _, zone = address.partition("%")
    if zone and not zone.isdigit() and zone != interface:
        raise ValueError(f"interface {interface!r} is not the one the address {address!r} goes out of: "
                         f"leave it out or write {zone!r}")


class PeerPathSection(msgspec.Struct, frozen=True, gc=False):
    """``[[peers]] paths = [{...}]``: one way to reach a peer (thunderbolt-net, 100 GbE, management)."""

    name: str
    """Path name (``tbnet``, ``roce``, ``mgmt``); the reading is ``<peer>/<path>``."""
    address: str
    """The peer's IP address on this path."""
    interface: str = ""
    """Local interface carrying the path (``thunderbolt0``): its link speed is reported with the path."""
    transport: Literal["udp", "tcp"] = "udp"
    """``udp``: echo probes to the peer's responder; ``tcp``: connect round trips to the peer's HTTP port
    (where UDP is blocked)."""
    port: int = 0
    """Port to probe; 0: ``[probes] port`` (udp) or the agent's default HTTP port 9871 (tcp)."""
    p99_limit_us: float | None = None
    """This path's p99 limit in microseconds; default ``[probes] p99_limit_us``."""

    def __post_init__(self) -> None:
        _check_name("name", self.name)
        try:
            ipaddress.ip_address(self.address)
        except ValueError:
            raise ValueError(f"address must be an IP address, got {self.address!r}") from None
        _check_interface(self.interface, self.address)
        check_ranges(self, {"port": (0, 65535), "p99_limit_us": (1.0, 60e6)})

    def target_port(self, probes: ProbesSection) -> int:
        """The port probes of this path go to."""
        if self.port:
            return self.port
        return probes.port if self.transport == "udp" else DEFAULT_PORT


class PeerSection(msgspec.Struct, frozen=True, gc=False):
    """``[[peers]]``: another node's agent this agent probes and answers."""

    name: str
    """The peer's node name (its ``[agent] node``): probes carry it, and the responder answers only
    requests from configured peer names."""
    paths: tuple[PeerPathSection, ...] = ()

    def __post_init__(self) -> None:
        _check_name("name", self.name)
        names = [p.name for p in self.paths]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"paths: {name!r} appears twice")
