"""Agent configuration: frozen dataclasses loaded from TOML, with RIGMON_* environment overrides."""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import socket
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rigmon.typed import TypedDataError, from_data

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


@dataclass(frozen=True, slots=True)
class AgentSection:
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


@dataclass(frozen=True, slots=True)
class CollectorSection:
    """``[collectors.NAME]``: per-collector switches."""

    enabled: bool = True
    interval_s: float | None = None
    """Seconds between runs of this collector; default: the agent's interval."""

    def __post_init__(self) -> None:
        check_ranges(self, {"interval_s": AGENT_RANGES["interval_s"]})


# --- Alarms and notification (rigmon/alarms, rigmon/notify) ---

RuleOverrideValue = str | int | float | bool | tuple[str | int | float | bool, ...] | dict[str, float]


@dataclass(frozen=True, slots=True)
class AlarmsSection:
    """``[alarms]``: which rules are in force."""

    enabled: bool = True
    """Evaluate node rules on every frame."""
    defaults: bool = True
    """Start from the rules shipped with rigmon."""
    rules_file: str = ""
    """TOML file of extra ``[[rule]]`` tables; a rule named like a default replaces it."""
    disable: tuple[str, ...] = ()
    """Names of rules to switch off."""
    overrides: dict[str, dict[str, RuleOverrideValue]] = field(default_factory=dict)
    """Single keys of rules by name: ``[alarms.overrides.psu_rail_low_warning] below = 11.6``."""
    recent: int = 200
    """Resolved alarms kept for /v1/alarms."""
    persist: bool = True
    """Keep trends, first-seen speeds and alarms across restarts in ``<state_dir>/alarm-state.json``
    (only when the agent has a state directory)."""
    save_interval_s: float = 60.0
    """Seconds between writes of the alarm state file (it is also written at a clean stop)."""

    def __post_init__(self) -> None:
        check_ranges(self, {"recent": (1, 1_000_000), "save_interval_s": (0.01, 86400.0)})


NotifyKind = Literal["webhook", "ntfy", "slack", "discord", "command"]


@dataclass(frozen=True, slots=True)
class NotifySection:
    """``[[notify]]``: one place alarms are sent to."""

    kind: NotifyKind
    """``webhook`` (rigmon's JSON), ``ntfy``, ``slack``, ``discord`` (their webhook payloads) or ``command``."""
    url: str = ""
    """Where to POST (every kind but ``command``)."""
    command: tuple[str, ...] = ()
    """Argument list run without a shell (``command`` kind); the alarm is in RIGMON_ALARM_* variables."""
    name: str = ""
    """Name in logs; default ``<kind>-<n>``."""
    min_severity: Literal["info", "warning", "critical"] = "warning"
    """Alarms below this severity are not sent."""
    send_resolved: bool = True
    """Also send a notification when an alarm resolves."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra HTTP headers (an ``Authorization`` for ntfy, say)."""
    timeout_s: float = 10.0
    """Per request or command run."""
    retries: int = 5
    """Attempts after the first failure."""
    backoff_s: float = 1.0
    """Wait before the first retry; doubles each time up to ``backoff_max_s``."""
    backoff_max_s: float = 60.0
    dedup_s: float = 300.0
    """A rule firing again on the same subject within this time is not sent again."""
    max_per_minute: int = 20
    """Rate limit; notifications beyond it are dropped and counted in the next one sent."""
    queue_size: int = 100
    """Pending notifications held; when full the oldest is dropped (the sampler never waits)."""

    def __post_init__(self) -> None:
        if self.kind == "command":
            if not self.command:
                raise ValueError("a command notifier needs command = [\"program\", \"arg\", ...]")
        elif not self.url.startswith(("http://", "https://")):
            raise ValueError(f"a {self.kind} notifier needs url = \"http(s)://...\", got {self.url!r}")
        if self.timeout_s <= 0 or self.backoff_s < 0 or self.backoff_max_s < self.backoff_s:
            raise ValueError("timeout_s must be positive and 0 <= backoff_s <= backoff_max_s")
        if self.retries < 0 or self.max_per_minute < 1 or self.queue_size < 1 or self.dedup_s < 0:
            raise ValueError("retries and dedup_s must not be negative; max_per_minute and queue_size at least 1")
        check_ranges(self, {"timeout_s": (0.01, 600.0), "retries": (0, 100), "backoff_s": (0.0, 3600.0),
                            "backoff_max_s": (0.0, 86400.0), "dedup_s": (0.0, 7 * 86400.0),
                            "max_per_minute": (1, 100_000), "queue_size": (1, 1_000_000)})


@dataclass(frozen=True, slots=True)
class StorageSection:
    """``[storage]``: disks, md arrays, NVMe, Thunderbolt/USB4 and network links."""

    udev: bool = True
    """Re-read at once on udev events (polling stays the ground truth; no udev is quiet)."""
    thunderbolt_expected_gbps: dict[str, float] = field(default_factory=dict)
    """Expected bandwidth per direction (Gb/s, speed x lanes) per link, keyed by router name
    (``0-1``) or ``unique_id``; unlisted links expect their generation's nominal rate."""
    infiniband_expected_gbps: dict[str, float] = field(default_factory=dict)
    """Expected rate (Gb/s) per RDMA port, keyed ``<device>/<port>`` (``mlx5_0/1``) or by device
    (every port of it); unlisted ports expect the best rate seen since the agent started."""
    balance_min_bytes_per_s: float = 50e6
    """Below this read+write rate an array or member counts as idle for balance figures."""
    net_stall_after_s: float = 5.0
    """An interface that is up but moved no packet for this long, after carrying traffic, is stalled."""

    def __post_init__(self) -> None:
        for key, gbps in self.thunderbolt_expected_gbps.items():
            if gbps <= 0:
                raise ValueError(f"thunderbolt_expected_gbps.{key} must be positive")
        if self.balance_min_bytes_per_s < 0:
            raise ValueError("balance_min_bytes_per_s must not be negative")
        if self.net_stall_after_s <= 0:
            raise ValueError("net_stall_after_s must be positive")
        check_ranges(self, {"balance_min_bytes_per_s": (0.0, 1e13), "net_stall_after_s": (0.1, 86400.0)})
        for key, gbps in self.thunderbolt_expected_gbps.items():
            if not gbps <= 1000:
                raise ValueError(f"thunderbolt_expected_gbps.{key} must be at most 1000, got {gbps!r}")
        for key, gbps in self.infiniband_expected_gbps.items():
            if not 0 < gbps <= 10_000:
                raise ValueError(f"infiniband_expected_gbps.{key} must be above 0 and at most 10000, got {gbps!r}")


@dataclass(frozen=True, slots=True)
class GpuSection:
    """``[gpu]``: NVML, GPU events and the kernel log reader."""

    nvml_timeout_s: float = 2.0
    """An NVML call (or one GPU's batch of calls) running longer than this marks the GPU collector hung."""
    event_wait_s: float = 0.5
    """Seconds one wait for an NVML Xid event blocks before checking for shutdown."""
    kmsg_path: str = "/dev/kmsg"
    """Kernel log device below the root (the simulator writes a plain file there)."""
    kernel_log_lines: int = 200
    """Matched kernel log lines (Xid, AER, fallen off the bus) kept for snapshots."""

    def __post_init__(self) -> None:
        if self.nvml_timeout_s <= 0:
            raise ValueError("nvml_timeout_s must be positive")
        if not 0 < self.event_wait_s <= 10:
            raise ValueError("event_wait_s must be in (0, 10]")
        if self.kernel_log_lines < 1:
            raise ValueError("kernel_log_lines must be at least 1")
        if not self.kmsg_path.startswith("/"):
            raise ValueError("kmsg_path must be absolute")
        check_ranges(self, {"nvml_timeout_s": (0.01, 600.0), "kernel_log_lines": (1, 100_000)})


@dataclass(frozen=True, slots=True)
class KernelLogSection:
    """``[kernel_log]``: how the kernel log at ``gpu.kmsg_path`` is written."""

    format: Literal["auto", "kmsg", "dmesg", "journal"] = "auto"
    """``auto``: /dev/kmsg when the path is a character device, else recognised by its first line
    (/dev/kmsg records, ``dmesg`` with timestamps, ``journalctl -k``); ``kmsg``, ``dmesg`` (also a
    capture without timestamps, ``dmesg -t``) or ``journal`` (``journalctl -k``, syslog files)."""


PsuProtocol = Literal["rm1", "text", "pzem017"]


@dataclass(frozen=True, slots=True)
class PsuHwmonSection:
    """``[psu.hwmon]``: 12 V from hwmon (Super I/O, BMC, PMBus PSUs) without a serial ADC."""

    enabled: bool = True
    """Read hwmon voltage and PMBus files (absent hardware is a quiet state)."""
    scale: dict[str, float] = field(default_factory=dict)
    """Multiplier per input, keyed ``CHIP/inN`` (``nct6779/in4 = 6.6``): Super I/O chips report
    the pin voltage behind a board-specific divider, as sensors.conf ``compute`` lines do."""
    share_imbalance_pct: float = 20.0
    """Paralleled PSUs whose current share deviates from an equal share by more than this
    many percentage points are reported as imbalanced (a corroding connection)."""

    def __post_init__(self) -> None:
        if self.share_imbalance_pct <= 0:
            raise ValueError("share_imbalance_pct must be positive")
        check_ranges(self, {"share_imbalance_pct": (0.0, 100.0)})


@dataclass(frozen=True, slots=True)
class PsuSection:
    """``[psu]``: the 12 V rail from a serial ADC or meter (see README "PSU rail")."""

    port: str = ""
    """Serial device (``/dev/serial/by-id/...``, read below the agent root); empty: no ADC."""
    protocol: PsuProtocol = "rm1"
    """``rm1`` (rigmon firmware), ``text`` (numbers, CSV, key=value) or ``pzem017`` (Modbus RTU)."""
    baud: int = 115200
    """Line speed; ignored by USB CDC devices. A PZEM-017 uses 9600."""
    primary: str = "v"
    """Load-side voltage channel: the one alarms and sag pushes look at."""
    psu_side: str = "vpsu"
    """PSU-side voltage channel for the path resistance (empty: none)."""
    current: str = "i"
    """Load current channel for the path resistance (empty: none)."""
    sag_volts: float = 11.5
    """A window whose minimum of ``primary`` is below this is published at once."""
    stale_after_s: float = 3.0
    """No valid window for this long (at least 3 windows) marks the readings stale."""
    reopen_min_s: float = 1.0
    """First delay before reopening a lost port; doubles up to ``reopen_max_s``."""
    reopen_max_s: float = 5.0
    """Longest delay between reopen attempts (a udev tty add retries at once)."""
    query_identity: bool = True
    """Send ``?`` after opening so an RM1 device repeats its identity line."""
    pzem_address: int = 1
    """Modbus slave address of a PZEM-017 (1..247)."""
    poll_interval_s: float = 1.0
    """Seconds between PZEM-017 polls (the meter refreshes about once a second)."""
    channels: dict[str, str] = field(default_factory=lambda: {"v": "0"})
    """``text`` protocol: rigmon channel -> field of the line (a key, a CSV header name, or a
    0-based column number). Channels starting with ``v`` are volts, with ``i`` amps."""
    scale: dict[str, float] = field(default_factory=dict)
    """``text`` protocol: multiplier per channel to volts or amps (``v = 0.001`` for mV)."""
    hwmon: PsuHwmonSection = field(default_factory=PsuHwmonSection)

    def __post_init__(self) -> None:
        if self.baud <= 0:
            raise ValueError("baud must be positive")
        if not 0 < self.sag_volts < 1000:
            raise ValueError("sag_volts must be between 0 and 1000")
        if self.stale_after_s <= 0 or self.poll_interval_s <= 0:
            raise ValueError("stale_after_s and poll_interval_s must be positive")
        if not 0 < self.reopen_min_s <= self.reopen_max_s:
            raise ValueError("reopen_min_s must be positive and at most reopen_max_s")
        if not 1 <= self.pzem_address <= 247:
            raise ValueError("pzem_address must be 1..247")
        check_ranges(self, {"baud": (50, 4_000_000), "stale_after_s": (0.01, 3600.0), "poll_interval_s": (0.01, 3600.0),
                            "reopen_min_s": (0.001, 3600.0), "reopen_max_s": (0.001, 3600.0)})
        if not self.primary:
            raise ValueError("primary must name a channel")
        for name in self.channels:
            if not name[:1] in ("v", "i"):
                raise ValueError(f"channels.{name}: channel names start with v (volts) or i (amps)")


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
        if self.commit_interval_s > 1.0:
            raise ValueError("commit_interval_s must be at most 1 (a crash may lose only about a second)")
        check_ranges(self, {
            "frames_keep_h": (0.01, 24.0 * 3660), "minute_keep_h": (0.01, 24.0 * 3660),
            "quarter_keep_h": (0.01, 24.0 * 3660), "max_mb": (1.0, 1024.0 * 1024),
            "commit_interval_s": (0.001, 1.0), "queue_frames": (1, 1_000_000),
        })


GuardMode = Literal["dry-run", "enforce"]


@dataclass(frozen=True, slots=True)
class GuardSection:
    """``[guard]``: the opt-in undervolt guard (issue 20; README "Undervolt guard").

    When the 12 V rail sags it caps the GPUs' clocks in steps (application clocks, then
    locked clocks, then a power limit) and restores the previous settings once the rail has
    been healthy for ``restore_after_s``. Off by default; ``mode = "dry-run"`` only reports
    what it would do.
    """

    enabled: bool = False
    """Run the guard at all."""
    mode: GuardMode = "dry-run"
    """``dry-run``: events say what it would do; ``enforce``: it sets the GPUs' clocks (needs root)."""
    rail_below_volts: float = 11.5
    """Trigger: an ADC window whose minimum is below this counts as a sag."""
    rail_count: int = 1
    """Trigger: this many sags within ``rail_window_s`` engage the guard."""
    rail_window_s: float = 60.0
    """Seconds over which sags are counted."""
    alarm_rules: tuple[str, ...] = ("psu_rail_low_critical",)
    """Trigger: any of these alarm rules firing (empty: alarms do not trigger)."""
    throttle_gpus: int = 2
    """Trigger: this many GPUs at once reporting ``hw_power_brake_slowdown`` or ``hw_slowdown``
    (0: throttle reasons do not trigger)."""
    app_clocks_mhz: tuple[int, ...] = ()
    """Step 1: application clocks as ``[memory, graphics]`` MHz (``[877, 1005]`` on a V100);
    empty: the highest memory clock and the largest supported graphics clock at most
    ``derive_fraction`` of the GPU's maximum."""
    derive_fraction: float = 0.66
    """Graphics clock of the derived pair as a fraction of the maximum (0.66 x 1530 -> 1005 on a V100)."""
    locked_clocks: bool = True
    """Step 2: lock the graphics clock to at most the step-1 graphics clock (where the GPU supports it)."""
    power_limit_w: float = 200.0
    """Step 3: power limit in watts (0: no power-limit step). The V100 overshoots it: last resort."""
    step_after_s: float = 15.0
    """A new trigger this long after the last step takes the next step."""
    restore_after_s: float = 300.0
    """Seconds without any trigger before the previous settings are restored."""
    max_actions_per_hour: int = 6
    """Ceiling on engage/step actions in any hour (restoring is always allowed)."""
    call_timeout_s: float = 5.0
    """An NVML call that takes longer is abandoned and reported (it never stalls sampling)."""
    gpus: tuple[int, ...] = ()
    """GPU indices to act on; empty: every GPU NVML lists."""

    def __post_init__(self) -> None:
        if not 5.0 <= self.rail_below_volts <= 15.0:
            raise ValueError("rail_below_volts must be between 5 and 15")
        if not 1 <= self.rail_count <= 1000:
            raise ValueError("rail_count must be 1..1000")
        if not 0 < self.rail_window_s <= 86400:
            raise ValueError("rail_window_s must be in (0, 86400]")
        if not 0 <= self.throttle_gpus <= 64:
            raise ValueError("throttle_gpus must be 0..64")
        if self.app_clocks_mhz:
            if len(self.app_clocks_mhz) != 2:
                raise ValueError("app_clocks_mhz must be [memory, graphics] (two numbers) or empty")
            for mhz in self.app_clocks_mhz:
                if not 100 <= mhz <= 20000:
                    raise ValueError(f"app_clocks_mhz: {mhz} MHz is out of range 100..20000")
        if not 0.2 <= self.derive_fraction <= 1.0:
            raise ValueError("derive_fraction must be between 0.2 and 1")
        if self.power_limit_w != 0 and not 50 <= self.power_limit_w <= 1000:
            raise ValueError("power_limit_w must be 0 (no power-limit step) or 50..1000")
        if not 0 <= self.step_after_s <= 3600:
            raise ValueError("step_after_s must be 0..3600")
        if not 1 <= self.restore_after_s <= 86400:
            raise ValueError("restore_after_s must be 1..86400")
        if not 1 <= self.max_actions_per_hour <= 1000:
            raise ValueError("max_actions_per_hour must be 1..1000")
        if not 0 < self.call_timeout_s <= 60:
            raise ValueError("call_timeout_s must be in (0, 60]")
        for index in self.gpus:
            if not 0 <= index < 64:
                raise ValueError(f"gpus: {index} is not a GPU index (0..63)")


#: UDP port of the latency probe responder (issue 21).
DEFAULT_PROBE_PORT = 9872
#: Probes one path keeps for its window (each is remembered until the window has passed it).
MAX_PROBES_PER_WINDOW = 36_000


@dataclass(frozen=True, slots=True)
class ProbesSection:
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
    """Replies per second the responder sends to one source address on average (token bucket)."""
    reply_burst: int = 100
    """Replies the responder sends to one source address at once before the rate applies."""

    def __post_init__(self) -> None:
        check_ranges(self, {"rate_hz": (0.1, 1000.0), "window_s": (1.0, 3600.0), "port": (0, 65535),
                            "p99_limit_us": (1.0, 60e6), "loss_limit_pct": (0.0, 100.0),
                            "reply_rate_per_s": (1.0, 1e6), "reply_burst": (1, 1_000_000)})
        try:
            ipaddress.ip_address(self.bind)
        except ValueError:
            raise ValueError(f"bind must be an IP address, got {self.bind!r}") from None
        if self.rate_hz * self.window_s > MAX_PROBES_PER_WINDOW:
            raise ValueError(f"rate_hz x window_s must be at most {MAX_PROBES_PER_WINDOW} probes per path and window, "
                             f"got {self.rate_hz * self.window_s:g}")


def _check_name(what: str, name: str) -> None:
    if not name or "/" in name or not name.isprintable() or name != name.strip() or len(name) > 64:
        raise ValueError(f"{what} must be 1-64 printable characters without '/' or surrounding spaces, got {name!r}")


@dataclass(frozen=True, slots=True)
class PeerPathSection:
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
        check_ranges(self, {"port": (0, 65535), "p99_limit_us": (1.0, 60e6)})

    def target_port(self, probes: ProbesSection) -> int:
        """The port probes of this path go to."""
        if self.port:
            return self.port
        return probes.port if self.transport == "udp" else DEFAULT_PORT


@dataclass(frozen=True, slots=True)
class PeerSection:
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


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """The whole agent configuration file."""

    agent: AgentSection = field(default_factory=AgentSection)
    collectors: dict[str, CollectorSection] = field(default_factory=dict)
    storage: StorageSection = field(default_factory=StorageSection)
    gpu: GpuSection = field(default_factory=GpuSection)
    kernel_log: KernelLogSection = field(default_factory=KernelLogSection)
    alarms: AlarmsSection = field(default_factory=AlarmsSection)
    notify: tuple[NotifySection, ...] = ()
    psu: PsuSection = field(default_factory=PsuSection)
    journal: JournalSection = field(default_factory=JournalSection)
    guard: GuardSection = field(default_factory=GuardSection)
    probes: ProbesSection = field(default_factory=ProbesSection)
    peers: tuple[PeerSection, ...] = ()
    """``[[peers]]``: nodes to probe (and to answer); none: probes are off."""

    def __post_init__(self) -> None:
        names = [p.name for p in self.peers]
        for index, name in enumerate(names):
            if names.index(name) != index:
                raise ValueError(f"peers[{index}].name: {name!r} appears twice")
            for number, path in enumerate(self.peers[index].paths):
                if path.target_port(self.probes) == 0:
                    raise ValueError(f"peers[{index}].paths[{number}].port: needed when [probes] port = 0")

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
