"""Flight recorder: the journal's history (/v1/history) and a node's part of a snapshot (/v1/snapshot)."""

from __future__ import annotations

from typing import Any

from rigmon.schema.frame import Event, Frame, Info
from rigmon.schema.record import Record


class HistorySeries(Record, frozen=True):
    """One numeric series over a window: parallel lists, one entry per point.

    ``at`` is the point's time (a frame's ``taken_at`` or a bucket's start, Unix seconds);
    ``min``/``mean``/``max`` are over the bucket (all three equal for single frames).
    """

    at: tuple[float, ...]
    min: tuple[float, ...]
    mean: tuple[float, ...]
    max: tuple[float, ...]


class History(Record, frozen=True):
    """Answer of ``/v1/history``: a window of the journal.

    ``tier`` is ``frames`` (every frame, ``step_s`` the agent's interval) or a bucket width
    such as ``60s``/``900s``. Series are named by their path in the readings
    (``net[eth0].rx_bytes_per_s``, ``gpus[0].power_w``). ``frames`` is filled only when asked.
    """

    schema: int
    node: str
    from_at: float
    to_at: float
    tier: str
    step_s: float
    series: dict[str, HistorySeries]
    events: tuple[Event, ...] = ()
    more: bool = False
    """Frames were cut at the answer's limit; ask again from the last frame's ``taken_at``."""
    frames: tuple[Frame, ...] = ()


class NodeCapture(Record, frozen=True):
    """Answer of ``/v1/snapshot``: what a bug report needs from one node right now.

    ``config`` is the agent configuration as TOML keys with secrets redacted; ``files`` are
    raw captures by path (``/proc/mdstat``, sysfs attributes, a collector's kernel log lines
    under ``collector:<name>/...``); ``errors`` says what could not be captured.
    """

    schema: int
    node: str
    taken_at: float
    info: Info
    config: dict[str, Any]
    latest: Frame | None
    files: dict[str, str]
    errors: tuple[str, ...] = ()
