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


# --- PSU rail: serial ADC (rigmon/collectors/psu.py), hwmon and PMBus (rigmon/collectors/hwmon_power.py),
# path resistance (rigmon/path_resistance.py) ---

EnvelopeSource = Literal["device", "host"]
PsuProtocolName = Literal["rm1", "text", "pzem017"]
ResistanceMethod = Literal["two_point", "load_steps"]


@dataclass(frozen=True, slots=True)
class VoltageEnvelope:
    """Mean, minimum and maximum of a voltage channel over one or more windows, in volts.

    The minimum is over every sample the device took: a sag of a few milliseconds is in it.
    """

    mean_volts: float
    min_volts: float
    max_volts: float


@dataclass(frozen=True, slots=True)
class CurrentEnvelope:
    """Mean, minimum and maximum of a current channel, in amperes (signed)."""

    mean_amps: float
    min_amps: float
    max_amps: float


@dataclass(frozen=True, slots=True)
class PsuAdcCounters:
    """Lines and windows the reader saw since the agent started (raw counters).

    Every dropped line is counted by reason; none of them produced a reading.
    """

    lines_total: int = 0
    windows_total: int = 0
    ignored_lines_total: int = 0
    """Lines that are not data (banners, debug text, CSV headers)."""
    partial_lines_total: int = 0
    """First line after each open, which is almost always cut."""
    long_lines_total: int = 0
    checksum_errors_total: int = 0
    malformed_lines_total: int = 0
    nonsense_lines_total: int = 0
    """Lines that parse but cannot be true (min above max, 400 V on a 12 V rail)."""
    lost_windows_total: int = 0
    """Windows the device numbered but that never arrived (seq gaps)."""
    overrun_windows_total: int = 0
    """Windows in which the device itself lost samples or records (flag 8)."""
    reboots_total: int = 0
    opens_total: int = 0
    disconnects_total: int = 0
    read_errors_total: int = 0
    """Failed polls (PZEM-017: no answer or a bad CRC)."""


@dataclass(frozen=True, slots=True)
class PsuRailReading:
    """The 12 V rail from the serial ADC: envelopes since the previous frame.

    ``volts`` is the load-side primary channel; its ``min_volts`` is what alarms look at.
    The envelope is the minimum of the windows' minima, the maximum of their maxima and
    the sample-weighted mean, over the ``windows`` that arrived since the previous frame.
    With ``windows`` 0 (the device reports slower than the agent samples) the last
    window is repeated; when nothing valid arrived for ``stale_after_s`` the envelopes
    are ``None`` and ``stale`` is true.
    """

    port: str
    protocol: PsuProtocolName
    connected: bool
    stale: bool
    envelope_source: EnvelopeSource
    """``device``: the device computed min/max over all its samples; ``host``: each line is
    one sample (text, pzem017), so sags shorter than its print interval are invisible."""
    windows: int
    volts: VoltageEnvelope | None
    amps: CurrentEnvelope | None
    channels_volts: dict[str, VoltageEnvelope]
    channels_amps: dict[str, CurrentEnvelope]
    samples: int | None
    """Sensor samples behind the envelopes (RM1 ``n`` summed), ``None`` when unknown."""
    window_s: float | None
    """Length of the latest window as the device measured it."""
    flags: int
    """OR of the RM1 flags of the windows (1 read failed, 2 clipped, 4 under-voltage alert
    latched, 8 overrun, 16 uncalibrated)."""
    under_voltage_latched: bool
    sag: bool
    """A window minimum was below the configured ``sag_volts``."""
    seq: int | None
    device_id: str | None
    firmware: str | None
    sensor: str | None
    last_window_at: float | None
    counters: PsuAdcCounters
    power_w: float | None = None
    """Power the device reports itself (PZEM-017), watts."""
    energy_wh_total: float | None = None


@dataclass(frozen=True, slots=True)
class PathResistanceReading:
    """Resistance of the supply path between PSU and load, from volts per ampere.

    ``two_point``: (PSU-side minus load-side voltage) / current, averaged over windows.
    ``load_steps``: slope of load-side voltage against current across load changes.
    """

    path: str
    method: ResistanceMethod
    resistance_mohm: float | None
    uncertainty_mohm: float | None
    """One standard error of the estimate."""
    points: int
    current_span_amps: float | None
    """Spread of current behind a ``load_steps`` fit (little spread, little certainty)."""
    trend_mohm_per_day: float | None
    """Slope of the daily estimates; a corroding connection makes it positive."""
    trend_days: float
    baseline_mohm: float | None
    """First day's estimate this agent run, for comparison."""


@dataclass(frozen=True, slots=True)
class HwmonVoltageReading:
    """One hwmon voltage input (Super I/O or BMC ``inN_input``), scaled to the real voltage."""

    sensor: str
    """``hwmonN/inM``."""
    chip: str
    label: str
    volts: float
    min_volts: float | None
    max_volts: float | None
    alarm: bool | None
    scale: float


@dataclass(frozen=True, slots=True)
class PmbusPsuReading:
    """One PMBus power supply exposed through hwmon (``pmbus`` and PSU-specific drivers).

    ``share_pct`` is this PSU's part of the summed output current of all PMBus PSUs;
    ``share_deviation_pct`` its difference from an equal share, in percentage points.
    """

    sensor: str
    chip: str
    vin_volts: float | None
    vout_volts: float | None
    iin_amps: float | None
    iout_amps: float | None
    pin_w: float | None
    pout_w: float | None
    temp_c: float | None
    fan_rpm: float | None
    alarms: tuple[str, ...]
    share_pct: float | None
    share_deviation_pct: float | None
    imbalanced: bool


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
    psu_rail: PsuRailReading | None = None
    path_resistance: tuple[PathResistanceReading, ...] = ()
    hwmon_volts: tuple[HwmonVoltageReading, ...] = ()
    pmbus_psus: tuple[PmbusPsuReading, ...] = ()


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
