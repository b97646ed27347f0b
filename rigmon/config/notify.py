"""``[[notify]]``: where alarms are sent (rigmon/notify)."""

from __future__ import annotations

from typing import Literal

import msgspec

from rigmon.config.common import check_ranges


NotifyKind = Literal["webhook", "ntfy", "slack", "discord", "command"]


class NotifySection(msgspec.Struct, frozen=True, gc=False):
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
    headers: dict[str, str] = msgspec.field(default_factory=dict)
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
            program = self.command[0]
            if "/" in program and not program.startswith("/"):
                # Taken from the agent's working directory: the operator's shell by hand, / under systemd.
                raise ValueError(f"command: the program {program!r} is a relative path; give it whole, from / "
                                 "(or a bare name found on PATH)")
        elif not self.url.startswith(("http://", "https://")):
            raise ValueError(f"a {self.kind} notifier needs url = \"http(s)://...\", got {self.url!r}")
        if self.timeout_s <= 0 or self.backoff_s < 0 or self.backoff_max_s < self.backoff_s:
            raise ValueError("timeout_s must be positive and 0 <= backoff_s <= backoff_max_s")
        if self.retries < 0 or self.max_per_minute < 1 or self.queue_size < 1 or self.dedup_s < 0:
            raise ValueError("retries and dedup_s must not be negative; max_per_minute and queue_size at least 1")
        check_ranges(self, {"timeout_s": (0.01, 600.0), "retries": (0, 100), "backoff_s": (0.0, 3600.0),
                            "backoff_max_s": (0.0, 86400.0), "dedup_s": (0.0, 7 * 86400.0),
                            "max_per_minute": (1, 100_000), "queue_size": (1, 1_000_000)})
