"""Frames, readings, events, agent identity, and the JSON codec of the /v1 API.

Within SCHEMA_VERSION changes are additive only: a new source adds its record types (a module
of this package) and a field of `Readings`; clients ignore keys they do not know.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, Union

from rigmon.schema.gpu import AmdGpuReading, GpuProcessReading, GpuReading, KernelLogReading
from rigmon.schema.guard import GuardReading
from rigmon.schema.host import HostReading, TemperatureReading
from rigmon.schema.links import InfinibandPortReading, NetInterfaceReading, ThunderboltDeviceReading
from rigmon.schema.power import (
    HwmonVoltageReading,
    PathResistanceReading,
    PmbusPsuReading,
    PsuRailReading,
)
from rigmon.schema.storage import DiskReading, NvmeReading, RaidArrayReading
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
class Readings:
    """Everything a node reports, grouped by record type.

    Each field holds one record type: ``X | None`` for a single record, ``tuple[X, ...]``
    for many. The sampler routes a collector's records into the field of their type, so
    a new source adds its record types here and nothing else changes.
    """

    host: HostReading | None = None
    temperatures: tuple[TemperatureReading, ...] = ()
    net: tuple[NetInterfaceReading, ...] = ()
    disks: tuple[DiskReading, ...] = ()
    raid: tuple[RaidArrayReading, ...] = ()
    nvme: tuple[NvmeReading, ...] = ()
    thunderbolt: tuple[ThunderboltDeviceReading, ...] = ()
    gpus: tuple[GpuReading, ...] = ()
    amd_gpus: tuple[AmdGpuReading, ...] = ()
    kernel_log: KernelLogReading | None = None
    psu_rail: PsuRailReading | None = None
    path_resistance: tuple[PathResistanceReading, ...] = ()
    hwmon_volts: tuple[HwmonVoltageReading, ...] = ()
    pmbus_psus: tuple[PmbusPsuReading, ...] = ()
    gpu_processes: tuple[GpuProcessReading, ...] = ()
    guard: GuardReading | None = None
    infiniband: tuple[InfinibandPortReading, ...] = ()


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
    alarm_rules: tuple[str, ...] = ()


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
    except RecursionError:
        # json.loads recurses per nesting level: a hostile or broken peer must not crash the reader.
        raise SchemaError("not JSON: nested too deeply") from None
    return decode_data(cls, data)


def decode_data(cls: type[T], data: Any) -> T:
    """Like `decode` for already parsed JSON data."""
    if isinstance(data, dict) and "schema" in data and data["schema"] != SCHEMA_VERSION:
        raise SchemaError(f"schema version {data['schema']!r}, this client speaks {SCHEMA_VERSION}")
    try:
        return from_data(cls, data)
    except TypedDataError as exc:
        raise SchemaError(f"bad {cls.__name__}: {exc}") from None
