"""Agent configuration: frozen dataclasses loaded from TOML, with RIGMON_* environment overrides."""

from __future__ import annotations

import dataclasses
import os
import socket
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rigmon.typed import TypedDataError, from_data

DEFAULT_PORT = 9871
DEFAULT_CONFIG_PATH = Path("/etc/rigmon/agent.toml")


class ConfigError(ValueError):
    """A configuration file or override is invalid; the message names the key."""


@dataclass(frozen=True, slots=True)
class AgentSection:
    """``[agent]``: identity, listening address, sampling and limits."""

    node: str = ""
    """Node name shown on dashboards; empty means the host name."""
    listen: str = f"127.0.0.1:{DEFAULT_PORT}"
    """HOST:PORT to serve HTTP on. Non-loopback addresses require a token."""
    token_file: str = ""
    """File holding the bearer token; empty means no auth (loopback only)."""
    root: str = "/"
    """Directory that stands for / when reading /proc, /sys and /dev."""
    interval_s: float = 1.0
    """Seconds between frames."""
    buffer_frames: int = 3600
    """Frames kept in memory for /v1/samples and stream resume."""
    collector_timeout_s: float = 5.0
    """A collector call running longer than this is reported as hung."""
    max_streams: int = 32
    """Concurrent /v1/stream subscriptions."""
    max_request_bytes: int = 65536
    """Largest request (headers plus body) accepted."""
    state_dir: str = ""
    """Directory of the journal (flight recorder); empty: `default_state_dir()` when the agent is
    started from the command line, no journal when it is built in-process without one."""

    def __post_init__(self) -> None:
        if self.interval_s <= 0:
            raise ValueError("interval_s must be positive")
        if self.buffer_frames < 1:
            raise ValueError("buffer_frames must be at least 1")
        if self.collector_timeout_s <= 0:
            raise ValueError("collector_timeout_s must be positive")
        if self.max_streams < 1:
            raise ValueError("max_streams must be at least 1")
        split_listen(self.listen)


@dataclass(frozen=True, slots=True)
class CollectorSection:
    """``[collectors.NAME]``: per-collector switches."""

    enabled: bool = True
    interval_s: float | None = None
    """Seconds between runs of this collector; default: the agent's interval."""


@dataclass(frozen=True, slots=True)
class JournalSection:
    """``[journal]``: the flight recorder's retention (SQLite in the agent's state directory).

    Whole frames are kept for ``frames_keep_h``; per-series min/mean/max in 1-minute
    buckets for ``minute_keep_h`` and in 15-minute buckets for ``quarter_keep_h``. When
    the file grows past ``max_mb`` the oldest frames go first, then the oldest buckets.
    """

    enabled: bool = True
    frames_keep_h: float = 48.0
    minute_keep_h: float = 24.0 * 30
    quarter_keep_h: float = 24.0 * 400
    max_mb: float = 2048.0
    commit_interval_s: float = 0.5
    """Longest time a frame waits in memory before it is committed."""
    queue_frames: int = 600
    """Frames waiting for the writer thread; beyond this new frames are dropped (and reported)."""

    def __post_init__(self) -> None:
        for name in ("frames_keep_h", "minute_keep_h", "quarter_keep_h", "max_mb", "commit_interval_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.commit_interval_s > 1.0:
            raise ValueError("commit_interval_s must be at most 1 (a crash may lose only about a second)")
        if self.queue_frames < 1:
            raise ValueError("queue_frames must be at least 1")


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """The whole agent configuration file."""

    agent: AgentSection = field(default_factory=AgentSection)
    collectors: dict[str, CollectorSection] = field(default_factory=dict)
    journal: JournalSection = field(default_factory=JournalSection)

    @property
    def node_name(self) -> str:
        """The node's name: configured, else the host name."""
        return self.agent.node or socket.gethostname()

    def collector(self, name: str) -> CollectorSection:
        """Settings of one collector (defaults when not configured)."""
        return self.collectors.get(name, CollectorSection())


#: Preferred state directory of a system-wide agent.
SYSTEM_STATE_DIR = Path("/var/lib/rigmon")


def default_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the agent keeps its journal when neither ``--state-dir`` nor ``state_dir`` says.

    /var/lib/rigmon when it exists and is writable (or can be created), else the user's
    state directory: ``$XDG_STATE_HOME/rigmon`` or ``~/.local/state/rigmon``.
    """
    env = os.environ if environ is None else environ
    system = SYSTEM_STATE_DIR
    if system.is_dir() and os.access(system, os.W_OK | os.X_OK):
        return system
    if not system.exists() and os.access(system.parent, os.W_OK | os.X_OK):
        return system
    base = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".local" / "state")
    return Path(base) / "rigmon"


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


# Environment overrides: RIGMON_<SECTION>_<KEY>, for the scalar keys of [agent].
_ENV_PREFIX = "RIGMON_AGENT_"


def load_agent_config(
    path: str | os.PathLike[str] | None,
    overrides: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
) -> AgentConfig:
    """Load the agent configuration.

    Args:
        path: TOML file; ``None`` uses /etc/rigmon/agent.toml when it exists, else defaults.
        overrides: ``[agent]`` keys set on the command line (win over file and environment).
        environ: environment for ``RIGMON_AGENT_<KEY>`` overrides (e.g. RIGMON_AGENT_LISTEN).

    Raises:
        ConfigError: unreadable file, bad TOML, unknown key or bad value, naming the key.
    """
    data: dict[str, object] = {}
    source = "defaults"
    if path is None and DEFAULT_CONFIG_PATH.exists():
        path = DEFAULT_CONFIG_PATH
    if path is not None:
        source = str(path)
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    agent = data.get("agent", {})
    if not isinstance(agent, dict):
        raise ConfigError(f"{source}: agent: expected a table")
    agent = {**agent, **_env_overrides(environ if environ is not None else os.environ)}
    agent.update({k: v for k, v in (overrides or {}).items() if v is not None})
    data = {**data, "agent": agent}
    try:
        return from_data(AgentConfig, data, strict=True)
    except TypedDataError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _env_overrides(environ: Mapping[str, str]) -> dict[str, object]:
    fields = {f.name: f.type for f in dataclasses.fields(AgentSection)}
    out: dict[str, object] = {}
    for key, text in environ.items():
        if not key.startswith(_ENV_PREFIX):
            continue
        name = key[len(_ENV_PREFIX) :].lower()
        if name not in fields:
            raise ConfigError(f"environment {key}: unknown key agent.{name}")
        kind = str(fields[name])
        try:
            out[name] = float(text) if "float" in kind else int(text) if "int" in kind else text
        except ValueError:
            raise ConfigError(f"environment {key}: expected a number, got {text!r}") from None
    return out
