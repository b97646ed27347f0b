"""Wire records of the PSU rail: serial ADC (collectors/psu.py), hwmon and PMBus
(collectors/hwmon_power.py), path resistance (rigmon/path_resistance.py)."""

from __future__ import annotations

from typing import Literal

from rigmon.schema.record import Record

EnvelopeSource = Literal["device", "host"]
PsuProtocolName = Literal["rm1", "text", "pzem017"]
ResistanceMethod = Literal["two_point", "load_steps"]


class VoltageEnvelope(Record, frozen=True):
    """Mean, minimum and maximum of a voltage channel over one or more windows, in volts.

    The minimum is over every sample the device took: a sag of a few milliseconds is in it.
    """

    mean_volts: float
    min_volts: float
    max_volts: float


class CurrentEnvelope(Record, frozen=True):
    """Mean, minimum and maximum of a current channel, in amperes (signed)."""

    mean_amps: float
    min_amps: float
    max_amps: float


class PsuAdcCounters(Record, frozen=True):
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


class PsuRailReading(Record, frozen=True):
    """The 12 V rail from the serial ADC: envelopes since the previous frame.

    ``volts`` is the load-side primary channel; its ``min_volts`` is what alarms look at.
    The envelope is the minimum of the windows' minima, the maximum of their maxima and
    the sample-weighted mean, over the ``windows`` that arrived since the previous frame.
    With ``windows`` 0 (the device reports slower than the agent samples) the last
    window is repeated; when nothing valid arrived for ``stale_after_s`` the envelopes
    are ``None`` and ``stale`` is true.

    While the port that was open is gone (unplugged, reset) the reading stays, with ``connected``
    false, ``stale`` true and no envelopes (past the windows that came before it went, which the first
    such reading has), and the counters as they stand; the ``psu`` collector's state is ``error``
    meanwhile. Before the port was first opened there is no reading.
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


class PathResistanceReading(Record, frozen=True):
    """Resistance of the supply path between PSU and load, from volts per ampere.

    ``two_point``: slope of the drop (PSU-side minus load-side voltage) against current, the
    two channels' offset at zero current taken out (`rigmon.path_resistance`).
    ``load_steps``: slope of load-side voltage against current across load changes.
    """

    path: str
    method: ResistanceMethod
    resistance_mohm: float | None
    uncertainty_mohm: float | None
    """One standard error of the estimate."""
    points: int
    current_span_amps: float | None
    """Span of current behind the estimate (little spread, little certainty)."""
    trend_mohm_per_day: float | None
    """Slope of the daily estimates; a corroding connection makes it positive."""
    trend_days: float
    baseline_mohm: float | None
    """The first day's estimate, kept across restarts and past the 120 days of daily fits kept."""


class HwmonVoltageReading(Record, frozen=True):
    """One hwmon voltage input (Super I/O or BMC ``inN_input``), scaled to the real voltage."""

    sensor: str
    """Its chip's libsensors name and its channel (``nct6798-isa-0290/in4``), the same every boot;
    ``hwmonN/inM`` when two chips share a name."""
    chip: str
    label: str
    volts: float
    min_volts: float | None
    max_volts: float | None
    alarm: bool | None
    scale: float


class PmbusPsuReading(Record, frozen=True):
    """One PMBus power supply exposed through hwmon (``pmbus`` and PSU-specific drivers).

    ``share_pct`` is this PSU's part of the summed output current of all PMBus PSUs;
    ``share_deviation_pct`` its difference from an equal share, in percentage points.
    ``sensor`` is the PSU's I2C client (``7-0058``, stable across reboots), or its hwmon
    device (``hwmon3``) when it has none.
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
