"""Shared by every section: the default port and file, `ConfigError`, range checks, ``HOST:PORT``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


DEFAULT_PORT = 9871
DEFAULT_CONFIG_PATH = Path("/etc/rigmon/agent.toml")


class ConfigError(ValueError):
    """A configuration file or override is invalid; the message names the key."""


class ConfigKeyError(ValueError):
    """A key of the agent's file names something that does not exist or does not fit (a collector, a
    rule to disable or override), found after loading by code that does not know the file: the message
    names the key, and the command that loaded the file adds its name (`in_config_file`)."""


def bearer_token_fault(token: str) -> str | None:
    """Why ``token`` (read from a file, stripped) cannot be sent as ``Authorization: Bearer TOKEN``, or
    ``None`` when it can.

    No HTTP header (nor Prometheus' credentials_file) carries a line break, and a space would end
    the token: an agent with such a token refuses every client 401, and a dashboard sending one has
    every request refused (or fails to send it at all).
    """
    if any(c.isspace() or not c.isprintable() for c in token):
        return "holds spaces, line breaks or control characters inside the token; it should hold one token on one line"
    return None


def config_file_in_use(path: str | os.PathLike[str] | None) -> str | os.PathLike[str] | None:
    """The agent's configuration file: ``path``, else /etc/rigmon/agent.toml when it exists, else None."""
    if path is None and DEFAULT_CONFIG_PATH.exists():
        return DEFAULT_CONFIG_PATH
    return path


def in_config_file(path: str | os.PathLike[str] | None, exc: ConfigKeyError) -> str:
    """``exc``'s message prefixed with the configuration file it is about (see `config_file_in_use`)."""
    used = config_file_in_use(path)
    return str(exc) if used is None else f"{used}: {exc}"


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
            raise ValueError(f"{name} must be between {_number(low)} and {_number(high)}, got {value!r}")


def _number(value: float) -> str:
    """A range's end as written in a file: ``67108864``, not ``6.71089e+07``; ``0.01``."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:g}"


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
        raise ValueError(f"listen must be HOST:PORT with a PORT from 0 to 65535, got {listen!r}")
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
