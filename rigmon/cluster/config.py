"""Dashboard configuration: the nodes to follow and the theme, from TOML in the user config directory."""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from rigmon.config.common import bearer_token_fault
from rigmon.typed import TypedDataError, from_data

DEFAULT_THEME = "rigmon-dark"


class DashConfigError(ValueError):
    """The dashboard configuration is invalid; the message names the file and key."""


@dataclass(frozen=True, slots=True)
class NodeEntry:
    """``[[nodes]]``: one agent to follow."""

    url: str
    """Agent base URL, ``http://HOST:PORT`` (``HOST:PORT`` alone means http)."""
    token: str = ""
    """Bearer token the agent requires; empty for none."""
    token_file: str = ""
    """File holding the token, instead of ``token``; must not be readable by other users."""
    control_token: str = ""
    """Control token of the agent (acknowledging alarms); empty: the dashboard cannot acknowledge."""
    control_token_file: str = ""
    """File holding the control token, instead of ``control_token``; must not be readable by
    other users."""
    ca_file: str = ""
    """PEM CA certificate(s) to verify an ``https://`` agent with; empty: httpx's certifi CA bundle."""

    def __post_init__(self) -> None:
        if not self.url:
            raise ValueError("url must not be empty")


@dataclass(frozen=True, slots=True)
class DashConfig:
    """The whole dashboard configuration file."""

    theme: str = DEFAULT_THEME
    """Theme name (a file of themes/ or one of Textual's)."""
    export_dir: str = ""
    """Directory the export key writes bundles and screenshots to; empty: `default_export_dir`."""
    nodes: tuple[NodeEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeTarget:
    """An agent the dashboard follows, with its token resolved."""

    url: str
    token: str | None = None
    control_token: str | None = None
    """Token that may acknowledge alarms on this agent, or ``None`` (read-only)."""
    ca_file: str | None = None
    token_from: str | None = None
    """Where ``token`` was given, as an error tells the operator to check it: ``--token-file
    /path``, ``~/.config/rigmon/dash.toml: nodes[1].token_file (node http://b:1)``; ``None`` when
    not known (or no token)."""
    token_where: str | None = None
    """Where a read token for this node would be given, as a 401 to a request without one tells the
    operator (``in ~/.config/rigmon/dash.toml: nodes[1].token_file (node http://b:1)``); ``None`` when it
    has a token, or the place is not known (then the general place, `rigmon.cluster.agent_answers.TOKEN_WHERE`)."""


def user_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/rigmon/dash.toml``, else ``~/.config/rigmon/dash.toml``."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "rigmon" / "dash.toml"


def default_export_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the export key writes unless ``export_dir`` says: the user's data directory,
    ``$XDG_DATA_HOME/rigmon/exports``, else ``~/.local/share/rigmon/exports`` (never the
    current directory, which after the quick start is a git checkout)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME") or Path.home()) / ".local" / "share")
    return Path(base) / "rigmon" / "exports"


def normalize_url(url: str) -> str:
    """Add ``http://`` to a bare ``HOST:PORT`` and drop a trailing slash."""
    url = url.strip().rstrip("/")
    return url if "://" in url else f"http://{url}"


def check_url(given: str, url: str) -> None:
    """Refuse what is no agent URL (``http://[::1``, ``ftp://x``, ``http://:9871``) before a client is built for it.

    Raises:
        DashConfigError: naming what was given.
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parses the port: "http://h:x" raises here
    except ValueError as exc:
        raise DashConfigError(f"{given}: not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DashConfigError(f"{given}: not an agent URL (http://HOST:PORT, https://HOST:PORT or HOST:PORT)")


def load_dash_config(path: str | os.PathLike[str] | None, environ: Mapping[str, str] | None = None) -> DashConfig:
    """Load the dashboard configuration.

    Args:
        path: TOML file; ``None`` uses `user_config_path` when it exists, else defaults.
        environ: environment for locating the user config directory.

    Raises:
        DashConfigError: unreadable file, bad TOML, unknown key or bad value, naming the key.
    """
    if path is None:
        default = user_config_path(environ)
        if not default.exists():
            return DashConfig()
        path = default
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise DashConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise DashConfigError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise DashConfigError(f"{path}: not UTF-8 text (byte {exc.start}): save it as UTF-8") from None
    try:
        config = from_data(DashConfig, data, strict=True)
    except TypedDataError as exc:
        raise DashConfigError(f"{path}: {exc}") from None
    _check_absolute_paths(config, str(path))
    return config


#: Keys of a ``[[nodes]]`` entry that name a file of this machine.
NODE_FILE_KEYS = ("token_file", "control_token_file", "ca_file")


def _check_absolute_paths(config: DashConfig, source: str) -> None:
    """Refuse a relative path written in the file, as the agent's file does (``~`` is expanded here:
    `rigmon setup agent` prints ``~/.config/rigmon/...`` for this file). Command-line flags stay
    relative to the directory the command runs in.

    A relative path was taken from the directory the dashboard was started in, not the file's: a
    ``token_file = "rel.token"`` worked from one directory and failed from another, and an
    ``export_dir = "exports"`` wrote bundles into whatever directory that was (a git checkout).

    Raises:
        DashConfigError: naming the file, the node and the key, and the value.
    """
    if config.export_dir and not _is_absolute(config.export_dir):
        raise DashConfigError(f"{source}: export_dir: {config.export_dir!r} {_NOT_ABSOLUTE}")
    for index, entry in enumerate(config.nodes):
        for key in NODE_FILE_KEYS:
            value: str = getattr(entry, key)
            if value and not _is_absolute(value):
                raise DashConfigError(f"{_node_key(source, index, entry.url, key)}: {value!r} {_NOT_ABSOLUTE}")


_NOT_ABSOLUTE = ("is not an absolute path; give it whole, from / or ~ (a relative one would be taken from "
                 "the directory the dashboard runs in, not this file's)")


def _is_absolute(path: str) -> bool:
    """Whether ``path`` is absolute once ``~`` is expanded (``~nobody-here/x`` stays relative)."""
    return os.path.isabs(os.path.expanduser(path))


def _node_key(source: str, index: int, url: str, key: str) -> str:
    """``<file>: nodes[1].token_file (node http://b:1)``: where a node's key is, and which node."""
    return f"{source}: nodes[{index}].{key} (node {url})"


def resolve_targets(urls: list[str], config: DashConfig, token: str | None = None,
                    control_token: str | None = None, ca_file: str | None = None,
                    source: str = "dash.toml", token_from: str | None = None) -> list[NodeTarget]:
    """The agents to follow: ``urls`` from the command line, else the config's nodes.

    A command-line URL that is also in the config takes the config's token; one that is
    not takes ``token``, ``control_token`` and ``ca_file`` (the command line's).

    Args:
        source: the file ``config`` was loaded from, named in the errors about its nodes.
        token_from: where ``token`` was given (``--token-file /path``), see `NodeTarget.token_from`.

    Raises:
        DashConfigError: a token file or CA file cannot be read, or a URL is not one; an error
            about a node of the config names ``source``, the node and the key.
    """
    entries = {normalize_url(e.url): (i, e) for i, e in enumerate(config.nodes)}
    chosen = [normalize_url(u) for u in urls] or list(entries)
    if urls:
        for given, url in zip(urls, chosen):
            check_url(given, url)
    else:
        for url, (index, entry) in entries.items():
            check_url(f"{source}: nodes[{index}].url {entry.url!r}", url)
    targets: list[NodeTarget] = []
    for url in dict.fromkeys(chosen):
        found = entries.get(url)
        if found is None:
            targets.append(NodeTarget(url=url, token=token, control_token=control_token,
                                      ca_file=_path(ca_file, "ca_file"), token_from=token_from if token else None,
                                      token_where=None if token else f"with rigmon dash --token-file FILE, or as "
                                      f"token_file of a [[nodes]] entry for {url} in {source}"))
        else:
            targets.append(_node_target(url, *found, source))
    return targets


def _node_target(url: str, index: int, entry: NodeEntry, source: str) -> NodeTarget:
    """The node ``entry`` (``nodes[index]`` of ``source``) at ``url``, its tokens read.

    Raises:
        DashConfigError: a token file or the CA file cannot be read, naming ``source``, the node and the key.
    """
    read = _secret(entry.token, entry.token_file, _node_key(source, index, entry.url, "token_file"))
    control = _secret(entry.control_token, entry.control_token_file,
                      _node_key(source, index, entry.url, "control_token_file"))
    ca_file = _path(entry.ca_file, _node_key(source, index, entry.url, "ca_file"))
    # The file wins over the inline token (`_secret`): the key named is the one the token came from.
    token_from = _node_key(source, index, entry.url, "token_file" if entry.token_file else "token") if read else None
    token_where = None if read else f"in {_node_key(source, index, entry.url, 'token_file')}"
    return NodeTarget(url=url, token=read, control_token=control, ca_file=ca_file, token_from=token_from,
                      token_where=token_where)


def _path(path: str | None, key: str) -> str | None:
    """A CA file's path with ``~`` expanded (``ca_file = "~/.config/rigmon/node.pem"``, as
    `rigmon setup agent` prints it; token files already are); ``None`` for none.

    Args:
        key: where the path was given, for the error message.

    Raises:
        DashConfigError: the file cannot be read (said at start, naming the key, not as an
            "internal error" of every connection).
    """
    if not path:
        return None
    full = Path(path).expanduser()
    try:
        with open(full, "rb"):
            pass
    except OSError as exc:
        raise DashConfigError(f"{key} {path}: {exc.strerror or exc}") from None
    return str(full)


def read_secret_file(path: str, key: str) -> str | None:
    """A token from a file only its owner may read or write; ``None`` when it is empty.

    Raises:
        DashConfigError: the file cannot be read, other users may read or write it (as the
            agent refuses: a token others can read is no secret), or it holds more than one word
            (no HTTP header carries it; `rigmon.config.common.bearer_token_fault`).
    """
    file = Path(path).expanduser()
    try:
        mode = file.stat().st_mode
        text = file.read_text().strip()
    except OSError as exc:
        raise DashConfigError(f"{key} {path}: {exc.strerror}") from None
    if mode & (stat.S_IRGRP | stat.S_IROTH | stat.S_IWGRP | stat.S_IWOTH):
        raise DashConfigError(f"{key} {path} is readable or writable by other users; chmod 600 it")
    fault = bearer_token_fault(text)
    if fault:
        raise DashConfigError(f"{key} {path} {fault}")
    return text or None


def _secret(value: str, path: str, key: str) -> str | None:
    """A token given inline or in a file (the file wins); ``None`` when neither is set.

    Args:
        key: where the file was given (file, node and key), for the error message.

    Raises:
        DashConfigError: see `read_secret_file`.
    """
    if path:
        return read_secret_file(path, key)
    return value or None
