"""``[agent]`` and ``[collectors.NAME]``, and where the agent keeps its state by default."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import msgspec

from rigmon.config.common import DEFAULT_PORT, check_ranges, split_listen


#: Sane range of every number in ``[agent]``.
AGENT_RANGES: dict[str, tuple[float, float]] = {
    "interval_s": (0.01, 3600.0),
    "buffer_frames": (1, 1_000_000),
    "collector_timeout_s": (0.01, 600.0),
    "max_streams": (1, 4096),
    "max_request_bytes": (1024, 64 * 1024 * 1024),
    "head_timeout_s": (0.5, 60.0),
    "max_connections_per_client": (1, 4096),
    "rate_limit_per_s": (0.0, 100_000.0),
    "rate_limit_burst": (1, 1_000_000),
}


class AgentSection(msgspec.Struct, frozen=True, gc=False):
    """``[agent]``: identity, listening address, sampling and limits."""

    node: str = ""
    """Node name shown on dashboards; empty means the host name."""
    listen: str = f"127.0.0.1:{DEFAULT_PORT}"
    """HOST:PORT to serve HTTP on. Non-loopback addresses require a token."""
    token_file: str = ""
    """File holding the bearer token; empty means no auth (loopback only)."""
    control_token_file: str = ""
    """File holding the token of the control scope (acknowledging alarms); empty: read-only API."""
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
    head_timeout_s: float = 5.0
    """Seconds a connection may take to send a complete request head (after connecting or after
    its previous answer); a connection that has not is closed."""
    max_connections_per_client: int = 16
    """Connections one client address may hold at once; a new one beyond closes that address's
    longest-idle connection that has not sent a request head, or is refused."""
    state_dir: str = ""
    """Directory of the journal (flight recorder) and of ``alarm-state.json`` (trends and alarms kept
    across restarts); empty: `default_state_dir()` when the agent is started from the command line,
    no journal and no alarm state when it is built in-process without one."""
    tls_cert_file: str = ""
    """PEM certificate (chain) to serve HTTPS with; empty: plain HTTP. Needs ``tls_key_file``."""
    tls_key_file: str = ""
    """PEM private key of ``tls_cert_file``; must not be readable by other users."""
    rate_limit_per_s: float = 50.0
    """Requests per second one client address may make on average (token bucket); 0: no limit."""
    rate_limit_burst: int = 200
    """Requests one client address may make at once before the rate applies; beyond: 429."""
    user: str = ""
    """When started as root: the user to switch to after binding the port and opening devices."""

    def __post_init__(self) -> None:
        check_ranges(self, AGENT_RANGES)
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ValueError("tls_cert_file and tls_key_file go together")
        split_listen(self.listen)


class CollectorSection(msgspec.Struct, frozen=True, gc=False):
    """``[collectors.NAME]``: per-collector switches."""

    enabled: bool = True
    interval_s: float | None = None
    """Seconds between runs of this collector; default: the agent's interval."""

    def __post_init__(self) -> None:
        check_ranges(self, {"interval_s": AGENT_RANGES["interval_s"]})


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
