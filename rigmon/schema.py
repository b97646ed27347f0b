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
    # Storage and links (added by the storage collectors' work; additive).
    kind: str | None = None
    """``thunderbolt-net``, ``ethernet``, ``wifi``, ``infiniband``, ``bridge``, ``bond``, ``virtual``."""
    stalled: bool = False
    """Up with carrier, but no packet moved for a while although it used to carry traffic."""


# --- Storage and links: /proc/diskstats, /proc/mdstat, md sysfs, NVMe sysfs, Thunderbolt sysfs ---

RaidHealth = Literal["ok", "degraded", "recovering", "broken", "inactive"]
RaidMemberRole = Literal["in_sync", "rebuilding", "faulty", "spare", "journal", "missing", "unknown"]
LinkState = Literal["ok", "degraded", "unknown"]
ThunderboltKind = Literal["host", "device", "xdomain", "retimer"]


@dataclass(frozen=True, slots=True)
class DiskReading:
    """One whole block device (NVMe namespace, md array, SATA disk) from /proc/diskstats.

    Rates are ``None`` on the first sample and after a counter reset (device re-created);
    ``util_pct`` is the share of the interval the device had I/O in flight (iostat %util);
    ``*_await_ms`` is the mean time per completed request during the interval (iostat
    r_await/w_await), ``None`` when no request completed. ``discards_total`` is ``None`` on
    kernels before 4.18 and ``flushes_total`` before 5.5 (shorter diskstats lines).
    """

    name: str
    major: int
    minor: int
    reads_total: int
    writes_total: int
    read_bytes_total: int
    write_bytes_total: int
    in_flight: int
    discards_total: int | None
    flushes_total: int | None
    read_bytes_per_s: float | None
    write_bytes_per_s: float | None
    read_iops: float | None
    write_iops: float | None
    util_pct: float | None
    read_await_ms: float | None
    write_await_ms: float | None


@dataclass(frozen=True, slots=True)
class RaidMemberReading:
    """One member of an md array.

    ``slot`` is the role index (``nvme0n1[0]`` in /proc/mdstat, ``dev-*/slot`` in sysfs);
    ``flags`` are the raw words of ``dev-*/state`` (``in_sync``, ``faulty``, ``write_error``...);
    ``present`` is false when the member's block device is gone (enclosure unplugged) while
    md still lists it. Rates come from the member's own block counters.
    """

    name: str
    slot: int | None
    role: RaidMemberRole
    present: bool
    write_mostly: bool
    replacement: bool
    flags: tuple[str, ...]
    errors_total: int | None
    read_bytes_per_s: float | None
    write_bytes_per_s: float | None


@dataclass(frozen=True, slots=True)
class RaidArrayReading:
    """One md array from /proc/mdstat and /sys/block/mdX/md.

    ``md_name`` is the /dev/md/NAME handle behind the kernel name (``raid0n0`` for md127).
    ``mdstat_state`` is the word of /proc/mdstat (``active``, ``inactive``, ``broken``);
    ``array_state`` the sysfs word (``clean``, ``active``, ``broken``, ``inactive``...).
    ``degraded``, ``sync_*`` exist only for levels with redundancy (``None`` for RAID0 and
    linear). ``sync_progress_pct``, ``sync_speed_bytes_per_s`` and ``sync_eta_s`` describe
    a running resync/recovery/check/reshape. ``member_imbalance_pct`` is how far the slowest
    busy member lags the fastest ((max - min) / max of read+write bytes/s), ``None`` when
    the array is idle; ``vs_fastest_array_pct`` is this array's throughput as a share of the
    fastest array loaded at the same time, ``None`` unless at least two arrays are busy.
    """

    name: str
    md_name: str | None
    level: str | None
    health: RaidHealth
    mdstat_state: str
    array_state: str | None
    read_only: bool
    raid_disks: int | None
    working_disks: int | None
    degraded: int | None
    sync_action: str | None
    sync_progress_pct: float | None
    sync_speed_bytes_per_s: float | None
    sync_eta_s: float | None
    size_bytes: int | None
    chunk_bytes: int | None
    uuid: str | None
    members: tuple[RaidMemberReading, ...]
    read_bytes_per_s: float | None
    write_bytes_per_s: float | None
    member_imbalance_pct: float | None
    vs_fastest_array_pct: float | None


@dataclass(frozen=True, slots=True)
class NvmeReading:
    """One NVMe controller from /sys/class/nvme/nvmeX, its PCIe link and its hwmon sensor.

    ``model``, ``serial`` and ``firmware`` are stripped of the kernel's space padding.
    Link speeds are per lane in GT/s (``8.0`` for gen 3); ``link_lost`` is true when the
    function reads ``Unknown`` speed (fell off the bus); ``namespaces`` are the visible
    block devices (``nvme0n1``), mapped through the controller, never by name arithmetic.
    """

    name: str
    model: str | None
    serial: str | None
    firmware: str | None
    state: str | None
    transport: str | None
    address: str | None
    namespaces: tuple[str, ...]
    link_speed_gts: float | None
    link_width: int | None
    max_link_speed_gts: float | None
    max_link_width: int | None
    link_gen: int | None
    max_link_gen: int | None
    link_lost: bool
    temp_c: float | None
    temp_max_c: float | None
    temp_crit_c: float | None


@dataclass(frozen=True, slots=True)
class ThunderboltDeviceReading:
    """One router, XDomain host or retimer on the Thunderbolt/USB4 bus.

    ``*_speed_gbps`` are per lane (``20.0`` for a Gen 3 / USB4 lane); ``rx_gbps`` and
    ``tx_gbps`` are speed times lanes. ``expected_gbps`` is the bandwidth per direction the
    link should have: configured, else the nominal rate of its generation or the best seen
    since the agent started, whichever is higher (``expected_source`` says which).
    ``link_state`` is ``degraded`` below it or when rx and tx differ, ``unknown`` for the
    host router and retimers (they have no link files).
    """

    name: str
    kind: ThunderboltKind
    domain: int | None
    vendor: str | None
    device_name: str | None
    generation: int | None
    authorized: bool | None
    unique_id: str | None
    nvm_version: str | None
    rx_speed_gbps: float | None
    tx_speed_gbps: float | None
    rx_lanes: int | None
    tx_lanes: int | None
    rx_gbps: float | None
    tx_gbps: float | None
    expected_gbps: float | None
    expected_source: Literal["config", "generation", "best_seen"] | None
    link_state: LinkState
    degraded_reason: str | None


# --- GPUs: NVIDIA through NVML (collectors/gpu.py), AMD through amdgpu sysfs
# (collectors/amd_gpu.py), and the kernel log (collectors/kernel_log.py). ---

GpuState = Literal["ok", "lost"]
ClockReason = Literal[
    "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
    "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting",
    "board_limit", "reliability", "other",
]


@dataclass(frozen=True, slots=True)
class NvLinkReading:
    """One NVLink of a GPU: state and the driver's error counters since driver load.

    ``*_per_s`` are rates of the matching counters between two polls (``None`` on the
    first poll or after a reset).
    """

    link: int
    active: bool | None
    replay_total: int | None
    recovery_total: int | None
    crc_flit_total: int | None
    crc_data_total: int | None
    replay_per_s: float | None = None
    crc_flit_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One NVIDIA GPU as NVML (and sysfs, and the kernel log) see it.

    ``pci_bus_id`` is the sysfs spelling (``0000:1a:00.0``), ``pci_bus_id_nvml`` NVML's
    (``00000000:1A:00.0``) and ``pci_bus_id_xid`` the kernel's Xid spelling
    (``0000:1a:00``). ``state`` is ``lost`` once any signal said the GPU fell off the bus
    (NVML GPU_IS_LOST, a shrinking device count or PCI list, Xid 79 in the kernel log);
    a lost GPU stays listed with its identity, ``lost_at`` (Unix seconds) and
    ``lost_reason``, and every reading ``None``.

    Power: ``power_w`` is NVML's power reading (instantaneous on V100, a 1 s average on
    newer parts); ``power_peak_w``/``power_min_w`` come from the driver's power sample
    buffer between this poll and the previous one (``power_samples`` of them);
    ``power_instant_w`` is the instantaneous power field where the driver has it.
    ``clock_reasons`` are the decoded clock event (throttle) reasons; the violation
    counters are seconds spent capped by power or thermal policy since driver load.
    """

    index: int
    uuid: str | None
    name: str | None
    serial: str | None
    pci_bus_id: str | None
    pci_bus_id_nvml: str | None
    pci_bus_id_xid: str | None
    state: GpuState = "ok"
    lost_at: float | None = None
    lost_reason: str | None = None
    power_w: float | None = None
    power_peak_w: float | None = None
    power_min_w: float | None = None
    power_samples: int | None = None
    power_instant_w: float | None = None
    energy_j_total: float | None = None
    power_limit_w: float | None = None
    power_limit_enforced_w: float | None = None
    power_limit_default_w: float | None = None
    clock_sm_mhz: int | None = None
    clock_mem_mhz: int | None = None
    clock_graphics_mhz: int | None = None
    clock_app_graphics_mhz: int | None = None
    clock_app_mem_mhz: int | None = None
    clock_max_sm_mhz: int | None = None
    clock_max_mem_mhz: int | None = None
    clock_max_graphics_mhz: int | None = None
    clock_reasons: tuple[ClockReason, ...] | None = None
    violation_power_s_total: float | None = None
    violation_thermal_s_total: float | None = None
    temp_c: float | None = None
    fan_pct: float | None = None
    util_pct: float | None = None
    mem_util_pct: float | None = None
    mem_total_bytes: int | None = None
    mem_used_bytes: int | None = None
    pstate: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    pcie_replay_total: int | None = None
    pcie_replay_per_s: float | None = None
    nvlinks: tuple[NvLinkReading, ...] = ()
    ecc_corrected_total: int | None = None
    ecc_uncorrected_total: int | None = None


@dataclass(frozen=True, slots=True)
class AmdGpuReading:
    """One AMD GPU (amdgpu driver) from sysfs: ``card`` is the DRM card (``card0``).

    ``power_w`` is hwmon ``power1_average`` (or ``power1_input``); clocks are the
    current DPM levels of ``pp_dpm_sclk``/``pp_dpm_mclk``; on APUs such as Strix Halo
    "VRAM" is the carve-out of system memory.
    """

    card: str
    pci_bus_id: str | None
    power_w: float | None
    busy_pct: float | None
    clock_sclk_mhz: int | None
    clock_mclk_mhz: int | None
    temp_c: float | None
    vram_total_bytes: int | None
    vram_used_bytes: int | None


@dataclass(frozen=True, slots=True)
class KernelLogLine:
    """A kernel log record that a rule matched (Xid, fallen off the bus, PCIe AER).

    ``kind`` is ``xid``, ``gpu_off_bus`` or ``pcie_aer``; ``at`` is Unix seconds derived
    from the record's boot-relative timestamp; ``text`` is the unescaped message.
    """

    seq: int
    at: float | None
    level: int
    kind: str
    text: str


@dataclass(frozen=True, slots=True)
class KernelLogReading:
    """State of the kernel log reader: counts since the agent started and recent matches.

    ``lost_total`` counts records overwritten before they were read (EPIPE and sequence
    gaps). ``recent`` holds the last matched lines, oldest first.
    """

    records_total: int
    matched_total: int
    lost_total: int
    recent: tuple[KernelLogLine, ...] = ()


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


# --- Alarms (rigmon/alarms): the alarm records served on /v1/alarms and kept by the journal ---

AlarmState = Literal["pending", "firing", "resolved"]


@dataclass(frozen=True, slots=True)
class Alarm:
    """One alarm episode of a rule on one subject, from pending to resolved.

    ``id`` is unique per agent run and stays the same through the episode's transitions;
    a new episode of the same rule and subject gets a new id. ``started_at`` is when the
    condition was first seen, ``fired_at`` when the alarm fired (``None`` if it never did:
    a pending alarm whose condition cleared within its hold time), ``updated_at`` the last
    change of any field. Times are Unix seconds. ``value`` is the reading that decided
    (volts, a state, an increase, an age in seconds, a slope per day); ``count`` is how
    many matching events an event alarm has seen.
    """

    id: str
    rule: str
    rule_kind: str
    severity: Severity
    node: str
    subject: str
    state: AlarmState
    message: str
    started_at: float
    updated_at: float
    value: EventValue = None
    fired_at: float | None = None
    resolved_at: float | None = None
    acknowledged_at: float | None = None
    acknowledged_by: str | None = None
    count: int = 1
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AlarmList:
    """``/v1/alarms``: active alarms (pending or firing) and recently resolved ones, newest first."""

    node: str
    active: tuple[Alarm, ...]
    recent: tuple[Alarm, ...]
    rules: tuple[str, ...] = ()
    control: bool = False
    """Whether this agent accepts acknowledgements (a control token is configured)."""


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
