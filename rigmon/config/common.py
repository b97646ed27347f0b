"""Shared by every section: the default port and file, `ConfigError`, range checks, ``HOST:PORT``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


DEFAULT_PORT = 9871
DEFAULT_CONFIG_PATH = Path("/etc/rigmon/agent.toml")


class ConfigError(ValueError):
    """A configuration file or override is invalid; the message names the key."""


def check_ranges(section: object, ranges: Mapping[str, tuple[float, float]]) -> None:
    """Refuse a number of ``section`` outside its sane range (both ends included).

    A value that parses can still be absurd: ``interval_s = 0.000001`` sampled 850 frames a
    second, ``max_request_bytes = -1`` turned every request away.

    Raises:
        ValueError: naming the key, its range and the value.
    """
    for name, (low, high) in ranges.items():
        value = getattr(section, name)
        if value is None:
            continue
        if not low <= value <= high:  # also refuses NaN
            raise ValueError(f"{name} must be between {low:g} and {high:g}, got {value!r}")


def split_listen(listen: str) -> tuple[str, int]:
    """Split ``HOST:PORT`` (``[::1]:9871`` for IPv6) into host and port.

    Raises:
        ValueError: not of that form, or the port is out of range.
    """
    host, sep, port_text = listen.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ValueError(f"listen must be HOST:PORT, got {listen!r}")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} out of range")
    return host.strip("[]"), port


def local_url(listen: str, tls: bool) -> str:
    """The URL of an agent listening on ``listen`` from this machine (a wildcard address means loopback)."""
    host, port = split_listen(listen)
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"{'https' if tls else 'http'}://{host}:{port}"
