"""Frames, readings, events, agent identity, and the JSON codec of the /v1 API.

Within SCHEMA_VERSION changes are additive only: a new source adds its record types (a module
of this package) and a field of `Readings`; clients ignore keys they do not know.
"""

from __future__ import annotations

import json
import re
import threading
import typing
from typing import Any, Literal, TypeVar, Union

import msgspec

from rigmon.schema.gpu import AmdGpuReading, GpuProcessReading, GpuReading, KernelLogReading
from rigmon.schema.guard import GuardReading
from rigmon.schema.host import HostReading, TemperatureReading
from rigmon.schema.links import (
    InfinibandPortReading,
    NetInterfaceReading,
    PeerPathReading,
    ProbeResponderReading,
    ThunderboltDeviceReading,
)
from rigmon.schema.power import (
    HwmonVoltageReading,
    PathResistanceReading,
    PmbusPsuReading,
    PsuRailReading,
)
from rigmon.schema.record import Record
from rigmon.schema.storage import DiskReading, NvmeReading, RaidArrayReading
from rigmon.typed import TypedDataError, from_data

SCHEMA_VERSION = 1

T = TypeVar("T")

Severity = Literal["info", "warning", "critical"]
CollectorState = Literal["ok", "error", "absent", "hung", "pending"]
EventValue = Union[str, int, float, bool, None]


class SchemaError(ValueError):
    """Raised when bytes from the wire are not a valid record of this schema version."""


class CollectorStatus(Record, frozen=True):
    """Health of one collector in one frame.

    ``state`` is ``absent`` when the hardware is not there (a quiet, normal state), ``hung``
    when the last call overran its timeout and has not returned yet, ``pending`` when not yet
    known: before the first run finished, or while the collector says it is starting (NVML's
    slow first init; ``error`` says why). ``pending`` is neither a failure nor an absence.
    """

    state: CollectorState
    ok: bool
    error: str | None = None
    duration_s: float | None = None
    sampled_at: float | None = None


class Event(Record, frozen=True):
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
    data: dict[str, EventValue] = msgspec.field(default_factory=dict)


class Readings(Record, frozen=True):
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
    peer_paths: tuple[PeerPathReading, ...] = ()
    probe_responder: ProbeResponderReading | None = None


class Frame(Record, frozen=True):
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


class Gap(Record, frozen=True):
    """Sent on the stream when frames a resuming client asked for are gone from the buffer.

    Frames ``from_seq`` to ``to_seq`` (inclusive) of ``run_id`` cannot be sent.
    """

    run_id: str
    from_seq: int
    to_seq: int
    reason: str


class Info(Record, frozen=True):
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


# The codec is msgspec's: compiled, validating, and driven by the records' own annotations
# (the records are msgspec Structs, `Record`; field order is key order, every field is written,
# defaults included; a new record type or field needs nothing here). It replaced
# rigmon.typed's reflection converter on the wire, which cost 5-10 times as much per frame.
#
# Non-finite floats: JSON has none. Encoding a record holding NaN or +-inf raises ValueError
# (as ``json.dumps(allow_nan=False)`` did; msgspec alone would write ``null``), and decoding
# refuses ``NaN``/``Infinity`` tokens and numbers beyond float range with a SchemaError.

_JSON = msgspec.json.Encoder()
_MSGPACK = msgspec.msgpack.Encoder()
#: A msgpack float64 (0xcb) whose exponent bits are all ones: NaN or +-inf. Other bytes can match
#: by chance (inside a string or an integer); a match is then checked exactly, so it costs time only.
_NONFINITE_MSGPACK = re.compile(rb"\xcb[\x7f\xff][\xf0-\xff]")


def encode(record: Any) -> bytes:
    """Encode a record (any `Record` of this package, or a tree holding them) as compact UTF-8 JSON.

    Raises:
        ValueError: the record holds a NaN or infinite float.
    """
    raw = _JSON.encode(record)
    if _NONFINITE_MSGPACK.search(_MSGPACK.encode(record)) is not None:
        # Raises ValueError when a float really is NaN or infinite.
        json.dumps(msgspec.to_builtins(record), allow_nan=False)
    return raw


#: msgspec works out how to decode a Struct class on the class's first use and keeps it on the
#: class. Two threads doing that for the same class at once can crash the process (a segfault:
#: two agents' journal threads in one process decoding their first frame). Typed decoders are
#: built under this lock, once per type, before any decode of that type (see `_decoder`).
_BUILD_LOCK = threading.Lock()
_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}


def _decoder(cls: Any) -> msgspec.json.Decoder[Any]:
    """The JSON decoder of ``cls``, built once (under `_BUILD_LOCK`) and shared by every thread."""
    decoder = _DECODERS.get(cls)
    if decoder is None:
        with _BUILD_LOCK:
            decoder = _DECODERS.get(cls)
            if decoder is None:
                decoder = _DECODERS[cls] = msgspec.json.Decoder(cls)
    return decoder


def decode(cls: type[T], raw: bytes | str) -> T:
    """Decode JSON bytes into ``cls``, validating every field.

    Unknown keys are ignored (the schema is additive).

    Raises:
        SchemaError: the text is not JSON, does not fit ``cls``, or (for frames and info)
            carries another schema version.
    """
    try:
        record: T = _decoder(typing.cast(Any, cls)).decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise _explain(cls, raw, exc) from None
    except RecursionError:
        # msgspec, like json, recurses per nesting level: a hostile peer must not crash the reader.
        raise SchemaError("not JSON: nested too deeply") from None
    if getattr(record, "schema", SCHEMA_VERSION) != SCHEMA_VERSION:
        raise SchemaError(f"schema version {getattr(record, 'schema')!r}, this client speaks {SCHEMA_VERSION}")
    return record


def _explain(cls: type, raw: bytes | str, exc: Exception) -> SchemaError:
    """The SchemaError for input msgspec refused, worded as before (rare: bad input only).

    The input is parsed again with `json` and checked by `rigmon.typed`, whose messages name
    the dotted path of the bad key, dict keys included (msgspec says ``collectors[...]``).
    """
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as json_exc:
        return SchemaError(f"not JSON: {json_exc}")
    except RecursionError:
        # json.loads recurses per nesting level: a hostile or broken peer must not crash the reader.
        return SchemaError("not JSON: nested too deeply")
    try:
        _check_data(cls, data)
    except SchemaError as typed_exc:
        return typed_exc
    # Both parsers have their corner cases (UTF-16 text, NaN tokens): msgspec's word is final.
    if isinstance(exc, msgspec.DecodeError) and not isinstance(exc, msgspec.ValidationError):
        return SchemaError(f"not JSON: {exc}")
    return SchemaError(f"bad {cls.__name__}: {_path_text(str(exc))}")


def _check_data(cls: type, data: Any) -> None:
    if isinstance(data, dict) and "schema" in data and data["schema"] != SCHEMA_VERSION:
        raise SchemaError(f"schema version {data['schema']!r}, this client speaks {SCHEMA_VERSION}")
    try:
        from_data(cls, data)
    except TypedDataError as exc:
        raise SchemaError(f"bad {cls.__name__}: {exc}") from None


def decode_data(cls: type[T], data: Any) -> T:
    """Like `decode` for already parsed JSON data (`json.loads` gives NaN for ``NaN``: refused)."""
    # The decoder itself is not used: building it works out the classes' decoding under the lock.
    _decoder(typing.cast(Any, cls))
    try:
        record: T = msgspec.convert(data, typing.cast(Any, cls))
    except (msgspec.ValidationError, RecursionError) as exc:
        _check_data(cls, data)
        raise SchemaError(f"bad {cls.__name__}: {_path_text(str(exc))}") from None
    if _NONFINITE_MSGPACK.search(_MSGPACK.encode(record)) is not None:
        # msgspec.convert lets NaN and inf through; the typed check refuses them where a float is declared.
        _check_data(cls, data)
    if getattr(record, "schema", SCHEMA_VERSION) != SCHEMA_VERSION:
        raise SchemaError(f"schema version {getattr(record, 'schema')!r}, this client speaks {SCHEMA_VERSION}")
    return record


def _path_text(message: str) -> str:
    """A msgspec error message with its JSON path as the rest of rigmon writes it."""
    return message.replace("`$.", "`").replace("`$[", "`[").replace("`$`", "`<root>`")
