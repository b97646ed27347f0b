"""Wire records of the agent's /v1 API: frames, readings, events, and their JSON codec.

Within SCHEMA_VERSION changes are additive only: a new source adds its record types and a
field of `Readings`; clients ignore keys they do not know. Units are in the field names,
and a missing value is ``None`` (JSON ``null``), never 0, -1 or "N/A".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, Union

from rigmon.typed import TypedDataError, from_data, to_data

SCHEMA_VERSION = 1

T = TypeVar("T")

Severity = Literal["info", "warning", "critical"]
CollectorState = Literal["ok", "error", "absent", "hung", "pending"]
EventValue = Union[str, int, float, bool, None]


class SchemaError(ValueError):
    """Raised when bytes from the wire are not a valid record of this schema version."""


@dataclass(frozen=True, slots=True)
class CollectorStatus:
    """Health of one collector in one frame.

    ``state`` is ``absent`` when the hardware is not there (a quiet, normal state), ``hung``
    when the last call overran its timeout and has not returned yet, ``pending`` before
    the first run finished.
    """

    state: CollectorState
    ok: bool
    error: str | None = None
    duration_s: float | None = None
    sampled_at: float | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened: agent start, collector failing, GPU lost, link retrained...

    ``id`` is unique per agent run (``<run_id>-<n>``); ``at`` is Unix seconds; ``subject``
    names the thing concerned (``collector:host``, ``gpu:0``, ``link:0-1``).
    """

    id: str
    at: float
    kind: str
    severity: Severity
    subject: str
    message: str
    data: dict[str, EventValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HostReading:
    """CPU, load and memory of the node."""

    cpu_pct: float | None
    cpu_count: int | None
    load_1: float | None
    load_5: float | None
    load_15: float | None
    mem_total_bytes: int | None
    mem_available_bytes: int | None
    swap_total_bytes: int | None
    swap_free_bytes: int | None
    uptime_s: float | None
    boot_id: str | None


@dataclass(frozen=True, slots=True)
class TemperatureReading:
    """One temperature sensor: a thermal zone or an hwmon ``temp*_input``."""

    sensor: str
    label: str
    temp_c: float


@dataclass(frozen=True, slots=True)
class NetInterfaceReading:
    """One network interface: link state from sysfs, counters and rates from /proc/net/dev.

    Rates are ``None`` on the first sample and after a counter reset; ``*_total`` are the
    raw kernel counters.
    """

    name: str
    operstate: str | None
    carrier: bool | None
    speed_mbps: int | None
    mtu: int | None
    rx_bytes_total: int
    tx_bytes_total: int
    rx_packets_total: int
    tx_packets_total: int
    rx_errors_total: int
    tx_errors_total: int
    rx_dropped_total: int
    tx_dropped_total: int
    carrier_changes_total: int | None
    rx_bytes_per_s: float | None
    tx_bytes_per_s: float | None
    rx_packets_per_s: float | None
    tx_packets_per_s: float | None


@dataclass(frozen=True, slots=True)
class Readings:
    """Everything a node reports, grouped by record type.

    Each field holds one record type: ``X | None`` for a single record, ``tuple[X, ...]``
    for many. The sampler routes a collector's records into the field of their type, so
    a new source adds its record types here and nothing else changes.
    """

    host: HostReading | None = None
    temperatures: tuple[TemperatureReading, ...] = ()
    net: tuple[NetInterfaceReading, ...] = ()


@dataclass(frozen=True, slots=True)
class Frame:
    """One sample of a node: every collector's latest readings and health.

    ``seq`` is monotonic per agent run (``run_id``); ``taken_at`` and ``agent_start`` are
    Unix seconds; ``events`` are those that happened since the previous frame.
    """

    schema: int
    node: str
    run_id: str
    seq: int
    taken_at: float
    agent_start: float
    collectors: dict[str, CollectorStatus]
    readings: Readings
    events: tuple[Event, ...] = ()


@dataclass(frozen=True, slots=True)
class Gap:
    """Sent on the stream when frames a resuming client asked for are gone from the buffer.

    Frames ``from_seq`` to ``to_seq`` (inclusive) of ``run_id`` cannot be sent.
    """

    run_id: str
    from_seq: int
    to_seq: int
    reason: str


@dataclass(frozen=True, slots=True)
class Info:
    """Identity of an agent: ``/v1/info``."""

    schema: int
    node: str
    run_id: str
    agent_version: str
    agent_start: float
    interval_s: float
    collectors: tuple[str, ...]
    kernel: str | None = None
    buffer_frames: int | None = None


# --- Flight recorder: the journal's history (/v1/history) and a node's part of a snapshot (/v1/snapshot) ---


@dataclass(frozen=True, slots=True)
class HistorySeries:
    """One numeric series over a window: parallel lists, one entry per point.

    ``at`` is the point's time (a frame's ``taken_at`` or a bucket's start, Unix seconds);
    ``min``/``mean``/``max`` are over the bucket (all three equal for single frames).
    """

    at: tuple[float, ...]
    min: tuple[float, ...]
    mean: tuple[float, ...]
    max: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class History:
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


@dataclass(frozen=True, slots=True)
class NodeCapture:
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


def encode(record: Any) -> bytes:
    """Encode a record (any dataclass of this module) as compact UTF-8 JSON."""
    return json.dumps(to_data(record), separators=(",", ":"), allow_nan=False).encode()


def decode(cls: type[T], raw: bytes | str) -> T:
    """Decode JSON bytes into ``cls``, validating every field.

    Raises:
        SchemaError: the text is not JSON, does not fit ``cls``, or (for frames and info)
            carries another schema version.
    """
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SchemaError(f"not JSON: {exc}") from None
    return decode_data(cls, data)


def decode_data(cls: type[T], data: Any) -> T:
    """Like `decode` for already parsed JSON data."""
    if isinstance(data, dict) and "schema" in data and data["schema"] != SCHEMA_VERSION:
        raise SchemaError(f"schema version {data['schema']!r}, this client speaks {SCHEMA_VERSION}")
    try:
        return from_data(cls, data)
    except TypedDataError as exc:
        raise SchemaError(f"bad {cls.__name__}: {exc}") from None
