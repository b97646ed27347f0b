"""Wire records of the agent's /v1 API: frames, readings, events, and their JSON codec.

Within SCHEMA_VERSION changes are additive only: a new source adds its record types and a
field of `Readings`; clients ignore keys they do not know. Units are in the field names,
and a missing value is ``None`` (JSON ``null``), never 0, -1 or "N/A".

One module per source family; every name is importable from ``rigmon.schema``.
"""

from __future__ import annotations

from rigmon.schema.alarms import (
    Alarm,
    AlarmList,
    AlarmState,
)
from rigmon.schema.events import EVENT_KINDS, EventDataType
from rigmon.schema.frame import (
    SCHEMA_VERSION,
    CollectorState,
    CollectorStatus,
    Event,
    EventValue,
    Frame,
    Gap,
    Info,
    Readings,
    SchemaError,
    Severity,
    T,
    decode,
    decode_data,
    encode,
)
from rigmon.schema.gpu import (
    AmdGpuReading,
    ClockReason,
    GpuProcessReading,
    GpuReading,
    GpuState,
    GpuVendor,
    KernelLogLine,
    KernelLogReading,
    NvLinkReading,
)
from rigmon.schema.guard import (
    GuardGpuSettings,
    GuardModeName,
    GuardReading,
    GuardStateName,
    GuardStepName,
)
from rigmon.schema.history import (
    History,
    HistorySeries,
    NodeCapture,
)
from rigmon.schema.host import (
    HostReading,
    TemperatureReading,
)
from rigmon.schema.links import (
    InfinibandPortReading,
    LinkState,
    NetInterfaceReading,
    PeerPathReading,
    PeerPathState,
    ProbeResponderReading,
    RdmaHwCounterReading,
    RdmaLinkState,
    ThunderboltDeviceReading,
    ThunderboltKind,
)
from rigmon.schema.power import (
    CurrentEnvelope,
    EnvelopeSource,
    HwmonVoltageReading,
    PathResistanceReading,
    PmbusPsuReading,
    PsuAdcCounters,
    PsuProtocolName,
    PsuRailReading,
    ResistanceMethod,
    VoltageEnvelope,
)
from rigmon.schema.record import Record
from rigmon.schema.storage import (
    DiskReading,
    NvmeLinkState,
    NvmeReading,
    RaidArrayReading,
    RaidHealth,
    RaidMemberReading,
    RaidMemberRole,
)

__all__ = [
    "EVENT_KINDS",
    "SCHEMA_VERSION",
    "Alarm",
    "AlarmList",
    "AlarmState",
    "AmdGpuReading",
    "ClockReason",
    "CollectorState",
    "CollectorStatus",
    "CurrentEnvelope",
    "DiskReading",
    "EnvelopeSource",
    "Event",
    "EventDataType",
    "EventValue",
    "Frame",
    "Gap",
    "GpuProcessReading",
    "GpuReading",
    "GpuState",
    "GpuVendor",
    "GuardGpuSettings",
    "GuardModeName",
    "GuardReading",
    "GuardStateName",
    "GuardStepName",
    "History",
    "HistorySeries",
    "HostReading",
    "HwmonVoltageReading",
    "InfinibandPortReading",
    "Info",
    "KernelLogLine",
    "KernelLogReading",
    "LinkState",
    "PeerPathReading",
    "PeerPathState",
    "ProbeResponderReading",
    "NetInterfaceReading",
    "NodeCapture",
    "NvLinkReading",
    "NvmeReading",
    "PathResistanceReading",
    "PmbusPsuReading",
    "PsuAdcCounters",
    "PsuProtocolName",
    "PsuRailReading",
    "RaidArrayReading",
    "RdmaHwCounterReading",
    "RdmaLinkState",
    "RaidHealth",
    "RaidMemberReading",
    "RaidMemberRole",
    "NvmeLinkState",
    "Readings",
    "Record",
    "ResistanceMethod",
    "SchemaError",
    "Severity",
    "T",
    "TemperatureReading",
    "ThunderboltDeviceReading",
    "ThunderboltKind",
    "VoltageEnvelope",
    "decode",
    "decode_data",
    "encode",
]
